"""Generate the docs written from the code: `just docs` (`python -m tools.docgen`).

docs/protocol.md comes whole from the msgspec types (the prose is here; every schema
comes from `msgspec.json.schema_components`), and docs/cli.md's options table from the
fields of `bench_wire.config.DaemonOptions`, so neither can drift from the code
(tests/unit/test_protocol_doc.py and test_option_bounds.py compare them).
"""

import inspect
import json
import pathlib

import msgspec

from bench_wire import messages as m
from bench_wire import verbs
from bench_wire.config import OPTIONS, value_text
from bench_wire.errors import CODES, EXIT_CODES
from bench_wire.messages import DEFAULT_FRAME_BYTES

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"

# ---------------------------------------------------------------- docs/protocol.md

PROSE = f"""# The bench wire protocol (version {m.PROTOCOL_VERSION})

Generated from `bench_wire/messages.py` by `just docs`; do not edit by hand.

## Framing

JSON-lines over the Unix socket `$BENCH_DIR/benchd.sock`: one UTF-8 JSON object per
line, terminated by `\\n`. A line may be at most {DEFAULT_FRAME_BYTES} bytes (the
frame cap, reported by `hello` as `caps.frame_bytes`); a longer line is answered with
`frame-too-long` and the connection is closed, because the next frame's start cannot
be known. Every other bad line (not UTF-8, not JSON, not an object, unknown verb,
wrong or missing field) is answered with an error frame and the connection stays
usable. Requests on one connection are answered in order.

## Requests

`{{"verb": "<verb>", "id": <optional int or string>, "token": <optional>, ...fields}}`.
`id` is echoed in every frame of the answer. `token` is a session's `BENCH_TOKEN`: the
daemon derives the caller from it (a forged or stale token is refused with `bad-token`)
or, without one, from the connecting process, placed once when the connection is
accepted (below; other uids are refused with `peer-refused`). No request carries a
sender: the daemon never trusts one.

## Identity and permissions

The connecting process is read race-free when the connection is accepted
(`SO_PEERCRED` and `SO_PEERPIDFD`, else its start time) and placed once: in a sandboxed
session's PID namespace it is that session; otherwise the first live session leader
among its ancestors makes it that session. The daemon is the subreaper of its sessions'
processes, so a process that left its session and whose parents exited (a double fork,
`setsid -f`) hangs under the daemon: it is `unplaceable`, as is a process that is gone
or replaced before it is placed; an unplaceable process is never the operator. Every
other process of the daemon's uid (a terminal, cron, a systemd unit: none of them
descends from the daemon) is the operator. A connection placed as a session stays that
session and is closed when the session ends. Whether sessions are sandboxed is
`hello`'s `caps.isolation` (`on`/`off`, and `isolation_note` says why it is off).

Who may do what (checked in one place, before any handler runs; `forbidden` otherwise):

| verb | operator | a session |
| --- | --- | --- |
| `hello`, `mail/send`, `events`, `session/list`, `bridge/nodes` | yes | yes |
| `mail/list`, `mail/read`, `mail/search` | any mailbox (`handle`) | its own mailbox only |
| `mail/thread`, `mail/reply` | any message | mail it received (a thread: or sent) |
| `session/spawn` | yes (`sandbox: false` too) | jobs only (with `job`), never `sandbox: false` |
| `session/tail` (also `screen: true`) | any session | itself and its descendants |
| `session/type` | any session | its descendants only |
| `session/kill` (also `tree`) | any session, `cancel` allowed | itself (never `cancel`) and its descendants (`cancel` too) |
| `session/attach`, `session/screen` | yes | no |
| `session/prune`, `stop`, `debug/fault`, `journal/ack` | yes | no |
| `bridge/pull`, `bridge/forwarded`, `bridge/deliver`, `bridge/report` | yes (the bridge runs as the operator) | no |
| `job/report` | no (`not-in-session`) | itself (a job's session) |

A job's child may end itself (its job settles from its exit and its replies are
owed); only whoever gave the task (its spawner, or the operator) may cancel a job (no
replies).

Connections: each is charged when it is accepted to its peer (a session, as placed,
or the operator). A session may hold `--session-connections` (16), the operator
128, all peers together `--max-connections` (256), and
sessions together never more than `--max-connections` minus `--operator-reserve` (32);
beyond that the connection gets one `too-many-connections` frame and is closed. A
connection with no request in flight and no stream open for `--idle-timeout` seconds
(60) gets one `idle-timeout` frame and is closed.

The client checks its daemon too: before it sends anything, `bench` reads the
socket's peer credentials and refuses a server that does not run as its own uid
(`daemon-not-ours`, exit code 5).

## Responses

`{{"type": "<type>", "id": <same>, "ok": true, ...fields}}` or
`{{"type": "error", "id": <same>, "ok": false, "error": {{"code": "<kebab-case>",
"message": "<a sentence>"}}}}`. `type` names the answer (for most verbs, the verb);
each request below says which answers it gets, and bench's clients refuse an answer of
another type as a `protocol` error rather than read it as something it is not.

## Streams

`events` (always), `session/tail`, `session/screen` and `session/attach` answer with
several frames: `event` frames (one event each) or `output` frames (base64 bytes of
the pty) or `screen` frames, and end with exactly one `end` frame (`reason`: `done`, `exited`,
`detached`, `stopped`, `slow-consumer`; `exit` when the session exited) or an error
frame. A follow stream (`events` with `follow: true`, `session/tail` with
`follow: true`, `session/screen` with `follow: true`) stays open until the client closes its side, the session ends, or the
daemon stops; a client that does not keep up is dropped with `slow-consumer`. While
attached, the client may send `session/input` (base64 keystrokes), `session/resize`
and `session/detach` on the same connection; these are refused outside an attach.

`session/screen` (operator only) sends the screen as the daemon's VT model renders it:
one `screen` frame now and, with `follow`, one more per change, at most about ten a
second (output arriving within 100 ms is one frame), and only when the text, the
colours or the cursor changed. `styles` holds, per line, the runs of cells that are not
in the default colours: `[start column, length, fg, bg, flags]`, where fg and bg are
`default`, a colour name (`red`, `brightblue`, ...) or six hex digits, and flags are
letters of `b` bold, `i` italics, `u` underline, `r` reverse.

## Search and threads

`mail/search` matches every word of `query` (each taken literally; a trailing `*` makes
it a prefix) against the subjects and bodies of the mail in one mailbox (`handle`) or,
for the operator without `handle`, every mailbox; a session always searches only its
own. Hits come best first (bm25; a subject match weighs twice a body match) with a
`snippet` of the body around the match (matches in `[` `]`), never the body.
`mail/thread` gives the conversation a message belongs to: from its first known
ancestor (by `in_reply_to`) down through every reply, oldest first, with bodies; a
session sees only the messages it received or sent. `mail/reply` sends to the
message's `reply_to` handles (else its sender), with `in_reply_to` set and the subject
`Re: <subject>` (not doubled); a session may answer only mail it received. A `key`
with several recipients becomes `<key>:<handle>` per recipient. None of these retire
mail.

## Events

The lines of `events.jsonl` and the `event` of `event` frames: `seq` (strictly
increasing), `ts` (ms since the epoch), `kind`, then the kind's fields.

## Error codes

| code | meaning | CLI exit code |
| --- | --- | --- |
"""


def _schema_section(title: str, types: tuple[type[msgspec.Struct], ...], key: str) -> str:
    _, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    out = [f"\n## {title}\n"]
    for t in types:
        tag = t.__struct_config__.tag
        schema = components[t.__name__]
        out.append(f"\n### `{tag}`\n")
        doc = inspect.cleandoc(t.__doc__ or "")
        if doc and not doc.startswith(t.__name__ + "("):
            out.append(f"\n{doc}\n")
        if issubclass(t, m.Request):
            out.append(f"\n{_answered_with(t)}\n")
        out.append("\n```json\n" + json.dumps(schema, indent=2, sort_keys=True) + "\n```\n")
    shared = sorted(set(components) - {t.__name__ for t in types})
    if shared:
        out.append(f"\n### Shared {key} structures\n")
        for name in shared:
            out.append(
                f"\n`{name}`:\n\n```json\n"
                + json.dumps(components[name], indent=2, sort_keys=True)
                + "\n```\n"
            )
    return "".join(out)


def _answered_with(t: type[m.Request]) -> str:
    """What a request is answered with, from its type parameter (`messages.ANSWERS`)."""
    if m.ANSWERS[t] == (m.Response,):  # no answer of its own
        return "Answered only when refused (an `error` frame)."
    tags = [a.__struct_config__.tag for a in m.ANSWERS[t]]
    names = " or ".join(f"`{tag}`" for tag in tags)
    if t.__struct_config__.tag in verbs.STREAMS:
        return f"Answered with {names} frames up to one `end` frame."
    return f"Answered with `{tags[0]}`." if len(tags) == 1 else f"Answered with {names}."


def render() -> str:
    rows = "".join(
        f"| `{code}` | {text} | {EXIT_CODES.get(code, 1)} |\n" for code, text in CODES.items()
    )
    return (
        PROSE
        + rows
        + _schema_section("Request schemas", m.REQUEST_TYPES, "request")
        + _schema_section("Response schemas", m.RESPONSE_TYPES, "response")
        + _schema_section("Event schemas", m.EVENT_TYPES, "event")
    )


# ---------------------------------------------------------------- docs/cli.md

BEGIN = "<!-- the options table: written by `just docs` -->"
END = "<!-- end of the options table -->"


def doc_table() -> str:
    """The options table of docs/cli.md, markers included."""
    rows = [BEGIN, "| option | env | default | least | most | meaning |", "| --- " * 6 + "|"]
    for o in OPTIONS:
        arg = "S" if o.unit == "s" else "N"
        cells = [
            f"`{o.flag} {arg}`",
            f"`{o.env}`",
            value_text(o.default, o.unit),
            value_text(o.low, o.unit),
            value_text(o.high, o.unit),
            o.help,
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([*rows, END])


def with_table(text: str) -> str:
    """A doc's text with its options table (between the markers) made current."""
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise ValueError("no options table (its markers) in the doc")
    return head + doc_table() + rest.partition(END)[2]


def main() -> None:
    (DOCS / "protocol.md").write_text(render())
    cli_md = DOCS / "cli.md"
    cli_md.write_text(with_table(cli_md.read_text()))


if __name__ == "__main__":
    main()
