"""`bench mail search`: full text over subject and body, best matches first.

Registered on the `mail` group by bench_cli.cli (a click command: not on the fast path).
"""

import re
import time

import click

from bench_cli import humanize
from bench_cli.cli import Ctx, call, common, done, examples, mail
from bench_wire import messages as m
from bench_wire.untrusted import escape

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


def hits_text(a: dict) -> str:
    hits = a.get("hits") or []
    if not hits:
        return "no mail matches"
    rows = []
    for h in hits:
        to = h.get("to") or h["handle"]  # handle@node for mail queued for another node
        rows.append(f"{h['mail_id']}  {to:<12} {h['state']:<6} from {h['from']:<12} {h['subject']}")
        # A snippet is a piece of someone's body, shown on one line: escaped (as all
        # untrusted text is on a terminal) and here even in a pipe, as it always was.
        rows.append("    " + " ".join(escape(h["snippet"]).split()))
    more = " (more: raise --limit)" if a.get("truncated") else ""
    foot = humanize.count(len(hits), "match", "matches") + more
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
def mail_search(bench_dir, as_json, query, handle, sender, since, limit):
    """Search mail: every word of QUERY must occur in subject or body (word* for a prefix)."""
    ctx = Ctx(bench_dir, as_json)
    a = call(
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
