"""`bench events`: read (and follow) the event log."""

import collections
import sys
import time
from collections.abc import Iterator
from datetime import datetime

import click

from bench_cli import output
from bench_cli.context import (
    Json,
    colour,
    common,
    complete_sessions,
    connect,
    examples,
)
from bench_cli.eventtext import format_event
from bench_wire import messages as m


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A duration back from now (30s) or a local date and time (2026-11-30T10:00), in ms
    since the epoch."""
    if value is None:
        return None
    try:
        return int((time.time() - output.parse_duration(value)) * 1000)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(value.strip()).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time: give a duration (30s, 10m, 2h, 1d) or a date and "
            "time (2026-11-30T10:00); --after SEQ takes a sequence number"
        ) from None


@click.command()
@common
@click.option("-f", "--follow", is_flag=True, help="keep printing events as they happen")
@click.option(
    "--since",
    "since",
    callback=_since,
    metavar="TIME",
    help="only events from this time on: 10m, 2h, 2026-11-30T10:00",
)
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=0,
    help="only events with a sequence number above this",
)
@click.option(
    "--tail",
    "last",
    type=click.IntRange(min=0),
    metavar="N",
    help="only the last N (then live, with -f)",
)
@click.option("--kind", help="only this kind (mail/sent) or kind prefix (job/, mail/)")
@click.option(
    "--session",
    "who",
    metavar="NAME",
    shell_complete=complete_sessions,
    help="only events of this session (id or handle) or its mailbox",
)
@click.option("--limit", type=click.IntRange(min=1), help="at most this many")
def events(
    bench_dir: str | None,
    as_json: bool,
    follow: bool,
    since: int | None,
    after: int,
    last: int | None,
    kind: str | None,
    who: str | None,
    limit: int | None,
) -> None:
    """Read (and follow) the event log."""

    def wanted(ev: Json) -> bool:
        if since is not None and ev["ts"] < since:
            return False
        return who is None or who in (
            ev.get("session"),
            ev.get("handle"),
            ev.get("to"),
            ev.get("from"),
        )

    def show(ev: Json) -> None:
        output.emit_json(ev) if as_json else output.write(format_event(ev, on))
        sys.stdout.flush()

    on = colour(as_json)
    shown = 0
    if last is not None:
        # The last N: read what is there (keeping N), then follow from where it ended.
        kept: collections.deque[Json] = collections.deque(maxlen=last)
        for ev in _events(bench_dir, after, kind, False):
            after = ev["seq"]
            if wanted(ev):
                kept.append(ev)
        for ev in kept:
            show(ev)
        shown = len(kept)
        if not follow:
            return
    if limit is not None and shown >= limit:
        return
    for ev in _events(bench_dir, after, kind, follow):
        if wanted(ev):
            show(ev)
            shown += 1
            if limit is not None and shown >= limit:
                return


events.epilog = examples(
    "bench events",
    "bench events -f",
    "bench events --tail 20 -f",
    "bench events --since 10m --kind agent/woken",
    "bench events --kind job/",
    "bench events --after 120",
    "bench events --session s1a2b3c4d",
)


def _events(bench_dir: str | None, after: int, kind: str | None, follow: bool) -> Iterator[Json]:
    """The log's records after `after` (then, with follow, live), up to the stream's end."""
    with connect(bench_dir, timeout=None) as conn:
        for frame in conn.stream(m.EventsRead(since=after, kind=kind, follow=follow)):
            yield frame.event
