"""Mail: `bench mail ...` (send, list and read run `bench_cli.entry`), `bench job wait`
and `bench mcp`."""

import re
import sys
import time
from collections.abc import Callable

import click
import msgspec

from bench_cli import entry, output
from bench_cli.context import (
    F,
    Group,
    ask,
    common,
    complete_handles,
    complete_sessions,
    examples,
    reply_to_option,
)
from bench_cli.output import done
from bench_wire import messages as m
from bench_wire.client import resolve_dir
from bench_wire.errors import WireError
from bench_wire.untrusted import escape

# --handle of mail list and mail read.
mailbox_option = click.option(
    "--handle",
    shell_complete=complete_handles,
    help="whose mailbox (operator only; default: yours)",
)


@click.group(cls=Group)
def mail() -> None:
    """Send, list and read mail; see the states of mail you sent; wait for mail."""


@mail.command("send")
@common
@click.argument("to", shell_complete=complete_handles)
@click.option("-s", "--subject", help="one line")
@click.option("-m", "--message", "body", help="the body (else standard input)")
@click.option("--key", help="idempotency key: a resend with the same key writes nothing")
@reply_to_option("where replies go (repeat)")
@click.option("--in-reply-to", "in_reply_to", metavar="ID", help="the message this answers")
def mail_send(bench_dir: str | None, as_json: bool, **opts: object) -> None:
    """Send mail to handle TO."""
    entry.from_click(("mail", "send"), bench_dir, as_json, **opts)


mail_send.epilog = examples(
    'bench mail send bob -s "review" -m "The patch is in /tmp/p.diff"',
    'git diff | bench mail send bob -s "the diff"',
    'bench mail send bob -m "ping" --key ping-42',
    'bench mail send bob -m "see above" --reply-to carol --in-reply-to 20261130T045611.123Z-0001',
    'bench mail send alice@node1 -m "the build is green"',
)


@mail.command("list")
@common
@click.option(
    "--state", type=click.Choice(["unread", "read", "all"]), default="unread", help="which messages"
)
@click.option("--limit", type=int, help="page size (default 50, at most 500)")
@mailbox_option
@click.option("--cursor", help="continue after this id (from a truncated listing)")
def mail_list(bench_dir: str | None, as_json: bool, **opts: object) -> None:
    """List mail: metadata only, never bodies."""
    entry.from_click(("mail", "list"), bench_dir, as_json, **opts)


mail_list.epilog = examples(
    "bench mail list",
    "bench mail list --state all --limit 500",
    "bench mail list --handle bob",
    "bench mail list --cursor ID",
)


@mail.command("read")
@common
@click.argument("mail_id", metavar="[ID]", required=False)
@mailbox_option
def mail_read(bench_dir: str | None, as_json: bool, **opts: object) -> None:
    """Read a message (default: the oldest unread) and retire it to read/."""
    entry.from_click(("mail", "read"), bench_dir, as_json, **opts)


mail_read.epilog = examples("bench mail read", "bench mail read 20261130T045611.123Z-0001")


# ---------------------------------------------------------------- search


def since_arg(value: str | None, now: float | None = None) -> str | None:
    """`--since`: an ISO-8601 UTC time as is, or an age (`90s`, `15m`, `2h`, `3d`) ago."""
    if value is None:
        return None
    try:
        t = (time.time() if now is None else now) - output.parse_duration(value)
    except ValueError:
        return value  # the daemon checks it, and says so (bad-since) if it is no time
    ms = int(t * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def hits_text(a: m.SearchOk) -> str:
    if not a.hits:
        return "no mail matches"
    rows = [f"{'ID':<25}  {'TO':<12} {'STATE':<9} {'FROM':<12} SUBJECT"]
    for h in a.hits:
        to = h.to or h.handle  # handle@node for mail queued for another node
        state = output.shown_state(h.handle, h.state)
        rows.append(f"{h.mail_id:<25}  {to:<12} {state:<9} {h.sender:<12} {h.subject}")
        # A piece of someone's body on one line: escaped, even in a pipe.
        rows.append("    " + " ".join(escape(h.snippet).split()))
    more = " (more: raise --limit)" if a.truncated else ""
    foot = output.count(len(a.hits), "match", "matches") + more
    return "\n".join(rows + [foot])


@mail.command("search")
@common
@click.argument("query")
@click.option("--handle", help="whose mailbox (operator only; default: every mailbox)")
@click.option(
    "--from", "sender", metavar="ADDR", help="only mail from this address (alice, alice@node2)"
)
@click.option("--since", metavar="T", help="only mail sent since T: 2026-11-30T04:56Z, or 2h ago")
@click.option("--limit", type=int, help="at most this many (default 50, at most 500)")
def mail_search(
    bench_dir: str | None,
    as_json: bool,
    query: str,
    handle: str | None,
    sender: str | None,
    since: str | None,
    limit: int | None,
) -> None:
    """Search mail: every word of QUERY must occur in subject or body (word* for a prefix)."""
    a = ask(
        bench_dir,
        m.MailSearch(
            query=query, handle=handle, sender=sender, since=since_arg(since), limit=limit
        ),
    )
    done(as_json, a, hits_text(a))


mail_search.epilog = examples(
    'bench mail search "flaky test"',
    "bench mail search 'deploy*' --from alice --since 2h --limit 20",
    "bench mail search timeout --handle bob",
    "bench mail search build --from operator@node2",
)


# ---------------------------------------------------------------- threads


def thread_head(msg: m.ThreadMessage, to: str) -> str:
    state = output.shown_state(msg.handle, msg.state)
    head = f"{msg.mail_id}  {msg.sender} -> {to}  {msg.date}  [{state}]"
    if msg.in_reply_to:
        head += f"  re {msg.in_reply_to}"
    if msg.origin and not msg.origin.startswith(msg.mail_id + "@"):
        head += f"  (sent as {msg.origin})"  # a copy from another node: its id there
    return head


def thread_text(a: m.ThreadOk) -> str:
    parts = output.thread_messages(a, thread_head)
    text = "\n".join(parts) if parts else "no messages"
    cut = output.thread_cut(a)
    return f"{text}\n{cut}" if cut else text


@mail.command("thread")
@common
@click.argument("mail_id")
@click.option(
    "--limit",
    type=click.IntRange(1),
    help="at most this many messages (default and most: the daemon's thread cap, 200)",
)
def mail_thread(bench_dir: str | None, as_json: bool, mail_id: str, limit: int | None) -> None:
    """Print the conversation MAIL_ID belongs to, oldest first (nothing is retired).

    MAIL_ID is an id here, or its id on the node it was sent from with that node's name
    (ID@node2). A longer thread is cut to MAIL_ID's neighbourhood (docs/cli.md)."""
    a = ask(bench_dir, m.MailThread(mail_id=mail_id, limit=limit))
    done(as_json, a, thread_text(a))


@mail.command("reply")
@common
@click.argument("mail_id")
@click.option("-m", "--message", "body", help="the body (else standard input)")
@click.option("-s", "--subject", help="one line (default: Re: and the message's subject)")
@click.option("--key", help="idempotency key: a resend with the same key writes nothing")
def mail_reply(
    bench_dir: str | None,
    as_json: bool,
    mail_id: str,
    body: str | None,
    subject: str | None,
    key: str | None,
) -> None:
    """Answer MAIL_ID: to its reply-to addresses (else its sender), with in-reply-to set.

    A sender or reply-to on another node (carol@node2) is answered across the bridge."""
    if body is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give the body with -m BODY or on standard input")
        body = sys.stdin.read()
    a = ask(bench_dir, m.MailReply(mail_id=mail_id, body=body, subject=subject, key=key))
    done(as_json, a, "\n".join(output.sent(msgspec.to_builtins(s)) for s in a.sent))


mail_thread.epilog = examples("bench mail thread 20261130T045611.123Z-0001")
mail_reply.epilog = examples(
    'bench mail reply 20261130T045611.123Z-0001 -m "Done: see /tmp/p.diff"',
    "bench mail reply 20261130T045611.123Z-0001 < answer.md",
)


# ---------------------------------------------------------------- states and waits

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_WAIT_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
SLACK_S = 10.0  # the client waits this much longer than the daemon's timeout


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`30`, `30s`, `250ms`, `5m`, `1h` -> seconds."""
    if value is None:
        return None
    found = _DURATION.fullmatch(value.strip())
    if found is None or float(found.group(1)) <= 0:
        raise click.BadParameter(f"{value!r} is not a duration (30s, 5m, 1h, 250ms)")
    return float(found.group(1)) * _WAIT_UNIT[found.group(2)]


def timeout_option(default: str) -> Callable[[F], F]:
    return click.option(
        "--timeout",
        callback=duration,
        default=default,
        metavar="DURATION",
        help="give up after this long (30s, 5m, 1h): exit 6, code timeout",
    )


def sent_text(a: m.SentListOk) -> str:
    """A table like `mail list`'s: id, recipient, state (and reason), its time, subject."""
    if not a.messages:
        return f"no sent mail from {a.sender}"
    states = [r.state + (f" ({r.reason})" if r.reason else "") for r in a.messages]
    tw = max(2, *(len(r.to) for r in a.messages))
    sw = max(5, *(len(s) for s in states))
    lines = [f"{'ID':<25}  {'TO':<{tw}}  {'STATE':<{sw}}  {'AT':<24}  SUBJECT"]
    for r, state in zip(a.messages, states, strict=True):
        lines.append(f"{r.mail_id:<25}  {r.to:<{tw}}  {state:<{sw}}  {r.at:<24}  {r.subject}")
    if a.truncated:
        lines.append("(more: raise --limit)")
    return "\n".join(lines)


def status_text(a: m.StatusOk) -> str:
    head = [f"id:    {a.mail_id}", f"from:  {a.sender}", f"to:    {a.to}"]
    head.append(f"state: {a.state}")
    lines = []
    for s in a.states:
        extra = [f"{k} {v}" for k in output.MARK_DETAILS if (v := getattr(s, k))]
        lines.append(f"  {s.state:<10} {s.at}" + ("  " + ", ".join(extra) if extra else ""))
    return "\n".join(head) + "\n" + "\n".join(lines)


@mail.command("sent")
@common
@click.option("--to", metavar="ADDR", shell_complete=complete_handles, help="only mail to ADDR")
@click.option("--state", type=click.Choice(m.STATES), help="only mail in this state now")
@click.option("--limit", type=click.IntRange(1, 500), default=50, help="at most this many")
@click.option("--from", "sender", metavar="ADDR", help="whose sent mail (operator only)")
def mail_sent(
    bench_dir: str | None,
    as_json: bool,
    to: str | None,
    state: str | None,
    limit: int,
    sender: str | None,
) -> None:
    """List the mail you sent with its delivery state, newest first."""
    a = ask(bench_dir, m.MailSentList(to=to, state=state, limit=limit, sender=sender))
    done(as_json, a, sent_text(a))


mail_sent.epilog = examples(
    "bench mail sent",
    "bench mail sent --to bob --state woken --limit 5",
    "bench mail sent --from alice  # the operator: anyone's",
)


@mail.command("status")
@common
@click.argument("mail_id", metavar="ID")
def mail_status(bench_dir: str | None, as_json: bool, mail_id: str) -> None:
    """Show one message's delivery states with their times."""
    a = ask(bench_dir, m.MailStatus(mail_id=mail_id))
    done(as_json, a, status_text(a))


mail_status.epilog = examples("bench mail status 20261130T045611.123Z-0001")


@mail.command("wait")
@common
@click.option("--from", "sender", metavar="ADDR", help="only mail from ADDR")
@click.option("--reply-to", "reply_to", metavar="ID", help="only a reply to message ID")
@timeout_option("5m")
def mail_wait(
    bench_dir: str | None,
    as_json: bool,
    sender: str | None,
    reply_to: str | None,
    timeout: float,
) -> None:
    """Block until matching mail arrives, then read it (retiring it), as `mail read` does.

    At the timeout: exit 6 with the code `timeout`. A wait that would close a cycle of
    waits (you wait on bob while bob waits on you) is refused at once: would-deadlock."""
    req = m.MailWait(sender=sender, reply_to=reply_to, timeout=timeout)
    a = ask(bench_dir, req, timeout=timeout + SLACK_S)
    done(as_json, a, output.message(msgspec.to_builtins(a)))


mail_wait.epilog = examples(
    "bench mail wait --from bob --timeout 10m",
    "bench mail wait --reply-to 20261130T045611.123Z-0001",
)


@click.group(cls=Group)
def job() -> None:
    """Jobs you started: wait for one to settle."""


@job.command("wait")
@common
@click.argument("handle", metavar="HANDLE", shell_complete=complete_sessions)
@timeout_option("30m")
def job_wait(bench_dir: str | None, as_json: bool, handle: str, timeout: float) -> None:
    """Block until the job of HANDLE (a handle or session id) settles; print its reply.

    The reply is the job's last `bench report` (or how its session ended); the reply
    mail itself is delivered as usual. At the timeout: exit 6, code timeout."""
    a = ask(bench_dir, m.JobWait(session=handle, timeout=timeout), timeout=timeout + SLACK_S)
    done(as_json, a, job_wait_text(a))


def job_wait_text(a: m.JobWaitOk) -> str:
    """`job w (s1a2b3c4d) interrupted (deadline): <path>`, then the reply."""
    head = f"job {a.handle} ({a.session}) {a.outcome}" + (f" ({a.reason})" if a.reason else "")
    if a.path:
        head += f": {a.path}"
    return f"{head}\n\n{a.reply}"


job_wait.epilog = examples("bench job wait worker --timeout 1h")
job.epilog = examples("bench job wait worker --timeout 1h")


# ---------------------------------------------------------------- mcp


@click.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR (else $BENCH_DIR)")
@click.option(
    "--print-config",
    "print_config",
    type=click.Choice(["claude", "codex", "pi"]),
    help="print the MCP configuration for this agent, then exit",
)
def mcp(bench_dir: str | None, print_config: str | None) -> None:
    """Serve the mailroom as MCP tools on stdin/stdout (started by an agent's MCP config)."""
    if print_config:
        from bench_mcp.tools import snippet

        note, text = snippet(print_config)
        click.echo(note, err=True)
        sys.stdout.write(text)
        return
    try:
        from bench_mcp import server
    except ImportError as err:  # the optional extra is not installed
        raise WireError(
            "mcp-missing",
            f"bench mcp needs the MCP SDK ({err.name or err} is missing): pip install 'bench[mcp]'",
        ) from None
    if bench_dir is not None:
        resolve_dir(bench_dir)  # an empty --dir is refused now, not at the first tool call
    sys.exit(server.main(bench_dir))
