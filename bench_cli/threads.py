"""`bench mail thread` and `bench mail reply`: conversations linked by in-reply-to.

Registered on the `mail` group by bench_cli.cli (click commands: not on the fast path).
"""

import sys

import click

from bench_cli import output
from bench_cli.cli import Ctx, call, common, done, examples, mail
from bench_wire import messages as m


def thread_text(a: dict) -> str:
    parts = []
    for msg in a.get("messages") or []:
        # `to` is the address as sent (bob@node2 for mail queued for another node).
        to = msg.get("to") or msg["handle"]
        head = f"{msg['mail_id']}  {msg['from']} -> {to}  {msg['date']}  [{msg['state']}]"
        if msg.get("in_reply_to"):
            head += f"  re {msg['in_reply_to']}"
        origin = msg.get("origin") or ""
        if origin and not origin.startswith(msg["mail_id"] + "@"):
            head += f"  (sent as {origin})"  # a copy from another node: its id there
        parts.append(f"{head}\nsubject: {msg['subject']}\n\n{msg['body'].rstrip()}\n")
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
def mail_thread(bench_dir, as_json, mail_id, limit):
    """Print the conversation MAIL_ID belongs to, oldest first (nothing is retired).

    MAIL_ID is an id here, or a message's id on the node it was sent from with that
    node's name (20261130T045611.123Z-0001@node2): a thread that crossed nodes is joined
    through the copies this node holds. A thread longer than the cap is cut to MAIL_ID's
    neighbourhood: the root, the nearest messages above it and the nearest replies below;
    the output says what was left out and which command shows it."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.MailThread(mail_id=mail_id, limit=limit))
    done(ctx, a, thread_text(a))


@mail.command("reply")
@common
@click.argument("mail_id")
@click.option("-m", "--message", "body", help="the body (else standard input)")
@click.option("-s", "--subject", help="one line (default: Re: and the message's subject)")
@click.option("--key", help="idempotency key: a resend with the same key writes nothing")
def mail_reply(bench_dir, as_json, mail_id, body, subject, key):
    """Answer MAIL_ID: to its reply-to addresses (else its sender), with in-reply-to set.

    A sender or reply-to on another node (carol@node2) is answered across the bridge."""
    ctx = Ctx(bench_dir, as_json)
    if body is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give the body with -m BODY or on standard input")
        body = sys.stdin.read()
    a = call(bench_dir, m.MailReply(mail_id=mail_id, body=body, subject=subject, key=key))
    done(ctx, a, "\n".join(output.sent(s) for s in a["sent"]))


mail_thread.epilog = examples("bench mail thread 20261130T045611.123Z-0001")
mail_reply.epilog = examples(
    'bench mail reply 20261130T045611.123Z-0001 -m "Done: see /tmp/p.diff"',
    "bench mail reply 20261130T045611.123Z-0001 < answer.md",
)
