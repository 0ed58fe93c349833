"""Mail: `bench mail send/list/read` (declared here for help and for what the fast
parser declines; both run `bench_cli.fastpath`), `search`, `thread` and `reply`, and
`bench mcp`, the mailroom as MCP tools."""

import re
import sys
import time

import click
import msgspec

from bench_cli import fastpath, humanize, output
from bench_cli.commands import waits
from bench_cli.context import (
    Ctx,
    ask,
    common,
    complete_handles,
    done,
    examples,
    reply_to_option,
)
from bench_cli.group import Group
from bench_wire import messages as m
from bench_wire.client import resolve_dir
from bench_wire.errors import WireError
from bench_wire.untrusted import escape


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
def mail_send(
    bench_dir: str | None,
    as_json: bool,
    to: str,
    subject: str | None,
    body: str | None,
    key: str | None,
    reply_to: tuple[str, ...],
    in_reply_to: str | None,
) -> None:
    """Send mail to handle TO."""
    sys.exit(
        fastpath.run(
            ("mail", "send"),
            {
                "dir": bench_dir,
                "json": as_json,
                "to": to,
                "subject": subject,
                "body": body,
                "key": key,
                "reply_to": list(reply_to),
                "in_reply_to": in_reply_to,
            },
        )
    )


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
@click.option(
    "--handle",
    shell_complete=complete_handles,
    help="whose mailbox (operator only; default: yours)",
)
@click.option("--cursor", help="continue after this id (from a truncated listing)")
def mail_list(
    bench_dir: str | None,
    as_json: bool,
    state: str,
    limit: int | None,
    handle: str | None,
    cursor: str | None,
) -> None:
    """List mail: metadata only, never bodies."""
    sys.exit(
        fastpath.run(
            ("mail", "list"),
            {
                "dir": bench_dir,
                "json": as_json,
                "state": state,
                "limit": limit,
                "handle": handle,
                "cursor": cursor,
            },
        )
    )


mail_list.epilog = examples(
    "bench mail list",
    "bench mail list --state all --limit 500",
    "bench mail list --handle bob",
    "bench mail list --cursor ID",
)


@mail.command("read")
@common
@click.argument("mail_id", metavar="[ID]", required=False)
@click.option(
    "--handle",
    shell_complete=complete_handles,
    help="whose mailbox (operator only; default: yours)",
)
def mail_read(
    bench_dir: str | None, as_json: bool, mail_id: str | None, handle: str | None
) -> None:
    """Read a message (default: the oldest unread) and retire it to read/."""
    sys.exit(
        fastpath.run(
            ("mail", "read"),
            {"dir": bench_dir, "json": as_json, "mail_id": mail_id, "handle": handle},
        )
    )


mail_read.epilog = examples("bench mail read", "bench mail read 20261130T045611.123Z-0001")


# ---------------------------------------------------------------- search


_AGO = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_arg(value: str | None, now: float | None = None) -> str | None:
    """`--since`: an ISO-8601 UTC time as is, or an age (`90s`, `15m`, `2h`, `3d`) ago."""
    if value is None:
        return None
    hit = _AGO.fullmatch(value.strip())
    if hit is None:
        return value  # the daemon checks it, and says so (bad-since) if it is no time
    t = (time.time() if now is None else now) - int(hit[1]) * _UNIT[hit[2]]
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
        # A snippet is a piece of someone's body, shown on one line: escaped (as all
        # untrusted text is on a terminal) and here even in a pipe, as it always was.
        rows.append("    " + " ".join(escape(h.snippet).split()))
    more = " (more: raise --limit)" if a.truncated else ""
    foot = humanize.count(len(a.hits), "match", "matches") + more
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
    ctx = Ctx(bench_dir, as_json)
    a = ask(
        bench_dir,
        m.MailSearch(
            query=query, handle=handle, sender=sender, since=since_arg(since), limit=limit
        ),
    )
    done(ctx, a, hits_text(a))


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

    MAIL_ID is an id here, or a message's id on the node it was sent from with that
    node's name (20261130T045611.123Z-0001@node2): a thread that crossed nodes is joined
    through the copies this node holds. A thread longer than the cap is cut to MAIL_ID's
    neighbourhood: the root, the nearest messages above it and the nearest replies below;
    the output says what was left out and which command shows it."""
    ctx = Ctx(bench_dir, as_json)
    a = ask(bench_dir, m.MailThread(mail_id=mail_id, limit=limit))
    done(ctx, a, thread_text(a))


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
    ctx = Ctx(bench_dir, as_json)
    if body is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give the body with -m BODY or on standard input")
        body = sys.stdin.read()
    a = ask(bench_dir, m.MailReply(mail_id=mail_id, body=body, subject=subject, key=key))
    done(ctx, a, "\n".join(output.sent(msgspec.to_builtins(s)) for s in a.sent))


mail_thread.epilog = examples("bench mail thread 20261130T045611.123Z-0001")
mail_reply.epilog = examples(
    'bench mail reply 20261130T045611.123Z-0001 -m "Done: see /tmp/p.diff"',
    "bench mail reply 20261130T045611.123Z-0001 < answer.md",
)


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


# ---------------------------------------------------------------- states and waits

mail.add_command(waits.mail_sent)
mail.add_command(waits.mail_status)
mail.add_command(waits.mail_wait)
