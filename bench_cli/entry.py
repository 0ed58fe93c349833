"""The `bench` console script: the agents' commands (mail send|list|read, report, hook)
parsed and run without click, anything else (or what `parse` declines: --help, a typo)
with it. Requests are plain dicts (`bench_wire.client.request`), not msgspec Structs:
msgspec and typing cost more than the rest of a send. tests/unit/test_client.py holds
the parser to click's and the bytes to the Structs'."""

import os
import stat  # loaded by os already
import sys

from bench_cli import output
from bench_wire import verbs
from bench_wire.client import Client, request
from bench_wire.errors import EXIT_OK, WireError

# typing is outside the fast path's import budget: the type checker's alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]  # a request's options, an answer: plain data
    Command = tuple[str, ...]  # ("mail", "send")

# command -> (options taking a value, options that repeat, positional names); and --dir,
# --json.
SPECS = {
    ("mail", "send"): (
        {
            "-s": "subject",
            "--subject": "subject",
            "-m": "body",
            "--message": "body",
            "--key": "key",
            "--reply-to": "reply_to",
            "--in-reply-to": "in_reply_to",
        },
        {"reply_to"},
        ("to",),
    ),
    ("mail", "list"): (
        {"--state": "state", "--limit": "limit", "--handle": "handle", "--cursor": "cursor"},
        set(),
        (),
    ),
    ("mail", "read"): ({"--handle": "handle"}, set(), ("mail_id?",)),
    ("report",): ({}, set(), ("text?",)),
    ("hook",): ({}, set(), ("event",)),
}


def parse(argv: list[str]) -> "tuple[Command, Json] | None":
    """(command, options) for a fast-path command line, or None to let click handle it."""
    # --dir and --json may also come before the command (`bench --dir X mail send ...`);
    # given both ways, the one after the command wins, as in click.
    before: Json = {}
    while argv:
        if argv[0] == "--json":
            before["json"], argv = True, argv[1:]
        elif argv[0] == "--dir" and len(argv) > 1:
            before["dir"], argv = argv[1], argv[2:]
        elif argv[0].startswith("--dir="):
            before["dir"], argv = argv[0][6:], argv[1:]
        else:
            break
    for cmd in SPECS:
        if tuple(argv[: len(cmd)]) == cmd:
            break
    else:
        return None
    valued, repeats, positional = SPECS[cmd]
    valued = {**valued, "--dir": "dir"}
    opts: Json = {name: [] for name in repeats}
    pos: list[str] = []
    args = argv[len(cmd) :]
    i = 0
    only_pos = False
    while i < len(args):
        a = args[i]
        i += 1
        if only_pos or a == "-" or not a.startswith("-"):
            pos.append(a)
            continue
        if a == "--":
            only_pos = True
            continue
        if a.startswith("--"):
            name, eq, val = a.partition("=")
        elif len(a) > 2:
            name, eq, val = a[:2], "=", a[2:]  # -sVALUE, as click reads it (-s=x is "=x")
        else:
            name, eq, val = a, "", ""
        if name == "--json" and not eq:
            opts["json"] = True
        elif name in valued:
            if not eq:
                if i >= len(args):
                    return None
                val = args[i]
                i += 1
            dest = valued[name]
            if dest in repeats:
                opts[dest].append(val)
            elif dest in opts:
                return None  # given twice: let click say what it thinks
            else:
                opts[dest] = val
        else:
            return None
    required = [p for p in positional if not p.endswith("?")]
    if len(pos) < len(required) or len(pos) > len(positional):
        return None
    for name, value in zip(positional, pos, strict=False):
        opts[name.rstrip("?")] = value
    for name, value in before.items():
        opts.setdefault(name, value)
    if cmd == ("hook",) and opts["event"] not in verbs.HOOK_EVENTS:
        return None  # click says which are known
    if cmd == ("mail", "list"):
        if opts.get("state", "unread") not in ("unread", "read", "all"):
            return None
        if "limit" in opts:
            try:
                opts["limit"] = int(opts["limit"])
            except ValueError:
                return None
    return cmd, opts


def run(cmd: "Command", opts: "Json") -> int:
    as_json = bool(opts.get("json"))
    hook = cmd == ("hook",)
    try:
        # An approval hook waits for `bench approve` as long as the daemon lets it
        # (--approval-wait); the agent's own hook timeout is the outer bound.
        with Client(opts.get("dir"), timeout=None if hook else 30.0) as conn:
            return COMMANDS[cmd](conn, opts, as_json)
    except WireError as err:
        code = output.fail(err, as_json)
        # An agent reads a hook's exit 2 as "block this": a failed report must never
        # stop its agent, only say why (on stderr).
        return 1 if hook else code
    except KeyboardInterrupt:
        return 130


def from_click(cmd: "Command", bench_dir: str | None, as_json: bool, **opts: object) -> None:
    """A fast-path command `parse` declined, with click's options: run as if parsed."""
    given = {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}
    sys.exit(run(cmd, {"dir": bench_dir, "json": as_json, **given}))


def _answer(a: "Json", as_json: bool, text: str) -> int:
    output.done(as_json, a, text)
    return EXIT_OK


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise WireError(
            "bad-stdin",
            f"{what} is not valid UTF-8: byte 0x{data[err.start]:02x} at offset {err.start}",
        ) from None


def _read_body(cap: int) -> str:
    """Standard input as the body, read up to cap + 1 bytes, its size told against the cap."""
    if sys.stdin is None or sys.stdin.isatty():
        raise WireError("usage", "give the body with -m BODY or on standard input")
    stdin = sys.stdin.buffer
    data = stdin.read(cap + 1)
    if len(data) > cap:
        size = f"more than {cap:,} bytes"
        try:
            st = os.fstat(stdin.fileno())
            if stat.S_ISREG(st.st_mode):
                size = f"{st.st_size - stdin.tell() + len(data):,} bytes"
        except (OSError, ValueError):
            pass
        raise WireError(
            "body-too-large",
            f"the body on standard input is {size}; the daemon's cap is {cap:,} "
            "bytes: nothing was sent",
        )
    if not data:
        raise WireError(
            "usage",
            "standard input was empty: give the body with -m "
            "BODY (-m '' for an empty one) or pipe it in",
        )
    return _utf8(data, "standard input")


# A -m body and a subject this small fit every daemon's caps: such a send skips the
# `hello` that asks for them, one round trip of two (the daemon checks them all the same).
SURE_BODY_BYTES = 64 * 1024
SURE_SUBJECT_CHARS = 200


def _caps(conn: Client) -> tuple[int, int]:
    caps = conn.call(request(verbs.HELLO, {}))["caps"]
    return caps["body_bytes"], caps["subject_chars"]


def mail_send(conn: Client, o: "Json", as_json: bool) -> int:
    # The caps come from the daemon itself (one round trip on the same connection), so a
    # body is refused here, in the user's terms, before it is read whole or sent.
    body = o.get("body")
    subject = o.get("subject")
    if body is None:
        body_cap, subject_cap = _caps(conn)
        body = _read_body(body_cap)
    else:
        try:
            size = len(body.encode("utf-8"))
        except UnicodeEncodeError:  # bytes the locale could not decode, kept as surrogates
            raw = body.encode("utf-8", "surrogateescape")
            _utf8(raw, "the -m body")
            raise
        if size <= SURE_BODY_BYTES and (subject is None or len(subject) <= SURE_SUBJECT_CHARS):
            body_cap, subject_cap = SURE_BODY_BYTES, SURE_SUBJECT_CHARS
        else:
            body_cap, subject_cap = _caps(conn)
        if size > body_cap:
            raise too_large(size, body_cap)
    if subject is not None and len(subject) > subject_cap:
        raise WireError(
            "subject-too-long",
            f"the subject is {len(subject)} characters; the "
            f"daemon's cap is {subject_cap}: nothing was sent",
        )
    fields = {
        "to": o["to"],
        "body": body,
        "subject": o.get("subject"),
        "key": o.get("key"),
        "reply_to": o.get("reply_to") or None,
        "in_reply_to": o.get("in_reply_to"),
    }
    a = _call(conn, verbs.MAIL_SEND, fields, o["to"], *(o.get("reply_to") or ()))
    text = output.sent(a)
    if a.get("new_mailbox"):  # a typo, perhaps: the handle it was probably meant for
        from bench_cli import hints  # only when something looks wrong

        text += hints.handle(a["to"], known_handles(conn))
    return _answer(a, as_json, text)


def too_large(size: int, cap: int) -> WireError:
    """A body over the daemon's cap, refused before it is sent (the CLI and `bench mcp`)."""
    return WireError(
        "body-too-large",
        f"the body is {size:,} bytes; the daemon's cap is {cap:,} bytes: nothing was sent",
    )


def _call(conn: Client, verb: str, fields: "Json", handle: str | None, *more: str) -> "Json":
    """conn.call, with the handle probably meant added to a bad-handle refusal: for the
    value the refusal names (`reply-to 'Alice' is not a handle`: the hint is for Alice,
    not the recipient), else for `handle`."""
    try:
        return conn.call(request(verb, fields))
    except WireError as err:
        if err.code in ("bad-handle", "bad-node") and handle:
            from bench_cli import hints  # only on this error path

            named = [h for h in (handle, *more) if repr(h) in err.message]
            err.message += hints.address(named[0] if named else handle, known_handles(conn))
        raise


def known_handles(conn: Client) -> set[str]:
    """The sessions' handles and the mailboxes: asked only when a handle looks wrong."""
    names = {"operator"}
    try:
        names |= {s["handle"] for s in conn.call(request(verbs.SESSION_LIST, {}))["sessions"]}
    except WireError:
        pass
    names.update(mailboxes(conn.bench_dir))
    return names


def mailboxes(bench_dir: str) -> list[str]:
    """The mailboxes on disk (none when the directory cannot be read)."""
    try:
        return os.listdir(os.path.join(bench_dir, "mail"))
    except OSError:
        return []


def mail_list(conn: Client, o: "Json", as_json: bool) -> int:
    state = o.get("state") or "unread"
    fields = {
        "handle": o.get("handle"),
        "state": state,
        "limit": o.get("limit"),
        "cursor": o.get("cursor"),
    }
    a = _call(conn, verbs.MAIL_LIST, fields, o.get("handle"))
    # The next page's command carries every option that shaped this one.
    again = f" --handle {o['handle']}" if o.get("handle") else ""
    if state != "unread":
        again += f" --state {state}"
    if o.get("limit") is not None:
        again += f" --limit {o['limit']}"
    if o.get("dir"):
        again += f" --dir {o['dir']}"
    text = output.listing(a, state, again)
    if not a.get("messages") and o.get("handle") and a["handle"] not in mailboxes(conn.bench_dir):
        # Not "no unread mail": there is no such mailbox at all (a typo, perhaps).
        text = f"no such mailbox: nothing was ever sent to {a['handle']}"
        from bench_cli import hints  # only when something looks wrong

        text += hints.handle(a["handle"], known_handles(conn))
    return _answer(a, as_json, text)


def mail_read(conn: Client, o: "Json", as_json: bool) -> int:
    fields = {"handle": o.get("handle"), "mail_id": o.get("mail_id")}
    a = _call(conn, verbs.MAIL_READ, fields, o.get("handle"))
    return _answer(a, as_json, output.message(a))


def report(conn: Client, o: "Json", as_json: bool) -> int:
    text = o.get("text")
    if text is None or text == "-":
        if text is None and (sys.stdin is None or sys.stdin.isatty()):
            raise WireError("usage", "give the report as TEXT, or - to read standard input")
        text = _utf8(sys.stdin.buffer.read(), "standard input")
        if not text:
            raise WireError("usage", "standard input was empty: give the report as TEXT")
    a = conn.call(request(verbs.JOB_REPORT, {"content": text}))
    return _answer(a, as_json, f"reported {a['bytes']} bytes for session {a['session']}")


HOOK_PAYLOAD_BYTES = 256 * 1024  # of the hook's JSON sent (the daemon reads no more)


def hook(conn: Client, o: "Json", as_json: bool) -> int:
    """`bench hook EVENT`: the event's JSON (standard input) to the daemon, its answer for
    the agent (if any) to standard output."""
    payload = ""
    if sys.stdin is not None and not sys.stdin.isatty():
        data = sys.stdin.buffer.read(HOOK_PAYLOAD_BYTES + 1)
        # Too big to send: the event alone still says what happened.
        payload = "" if len(data) > HOOK_PAYLOAD_BYTES else _utf8(data, "the hook's input")
    a = conn.call(request(verbs.AGENT_REPORT, {"event": o["event"], "payload": payload}))
    out = a.get("output")
    if out:
        sys.stdout.write(out + "\n")
    return EXIT_OK


COMMANDS = {
    ("mail", "send"): mail_send,
    ("mail", "list"): mail_list,
    ("mail", "read"): mail_read,
    ("report",): report,
    ("hook",): hook,
}


def main(leave: bool = True) -> int:
    """`bench`: a fast-path command here, anything else (or what `parse` declines) with click."""
    parsed = parse(sys.argv[1:])
    if parsed is not None:
        code = run(*parsed)
        if leave:
            _leave(code)
        return code
    from bench_cli import cli

    return cli.run()


def _leave(code: int) -> None:
    """End the process now, its output flushed: the interpreter's teardown costs a
    fast-path command about as much as its imports, and nothing is left to clean up."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: what a normal exit would also fail to write
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
