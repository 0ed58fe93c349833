"""What the daemon says about its own files: journal damage found at start (logged,
evented, kept for `bench status` until acknowledged), the disk (full, below its
reserve, the room held for the next start), and the one line that ends a daemon that
cannot go on."""

import errno
import os
import sqlite3
import sys

import msgspec
import structlog

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.store import statedir
from benchd.store.replay import Replayed


def replay_events(log: structlog.stdlib.BoundLogger, replayed: Replayed) -> list[m.Event]:
    """benchd.log lines for a replay, and a journal/damaged event per damaged stretch."""
    r = replayed
    if r.records or r.damage:
        log.warning(
            "journal replayed",
            records=r.records,
            files=r.files,
            renames=r.renames,
            log_bytes=r.log_bytes,
            damaged=len(r.damage),
            cut_seq=r.cut_seq,
        )
    events: list[m.Event] = []
    for dmg in r.damage:
        ev = m.JournalDamaged(
            segment=dmg.segment,
            offset=dmg.offset,
            size=dmg.size,
            held=dmg.held(),
            messages=dmg.messages,
            lost=dmg.lost,
            events=dmg.events,
            in_log=dmg.in_log,
        )
        log.error("journal damaged", **msgspec.structs.asdict(ev))
        events.append(ev)
    return events


def low_events(log: structlog.stdlib.BoundLogger, low: tuple[int, int] | None) -> list[m.Event]:
    """A disk/low event (and its log line) when preallocation gave way to the reserve."""
    if low is None:
        return []
    free, reserve = low
    log.warning("disk below its reserve: journal segments grow", free=free, reserve=reserve)
    return [m.DiskLow(free=free, reserve=reserve)]


def load_damage(bench_dir: str, log: structlog.stdlib.BoundLogger) -> list[m.JournalDamaged]:
    """The journal damage not yet acknowledged."""
    out = []
    for item in statedir.load_damage(bench_dir):
        try:
            out.append(msgspec.convert(item, m.JournalDamaged))
        except msgspec.ValidationError:
            log.warning("unreadable journal damage report skipped", item=repr(item))
    return out


def keep_damage(
    bench_dir: str, log: structlog.stdlib.BoundLogger, events: list[m.Event]
) -> list[m.JournalDamaged]:
    """Keep this start's journal/damaged events (their seqs now set) for `bench status`."""
    found = [e for e in events if isinstance(e, m.JournalDamaged)]
    if found:
        try:
            statedir.add_damage(bench_dir, [msgspec.to_builtins(e) for e in found])
        except OSError as err:
            log.error("journal damage report not kept", error=str(err))
    return found


class Damage:
    """The journal damage not yet acknowledged: what earlier starts found (read by the
    start-up with `load_damage`), then this start's, kept once logged; `bench status`
    shows it until `bench status --ack`."""

    def __init__(
        self, bench_dir: str, log: structlog.stdlib.BoundLogger, found: list[m.JournalDamaged]
    ) -> None:
        self.bench_dir = bench_dir
        self.log = log
        self.found = found

    def shown(self) -> list[m.JournalDamaged]:
        return self.found

    def keep(self, events: list[m.Event]) -> None:
        """This start's journal/damaged events, logged (their seqs set): kept on disk."""
        self.found += keep_damage(self.bench_dir, self.log, events)

    def ack(self) -> int:
        n = ack_damage(self.bench_dir, self.log, len(self.found))
        self.found = []
        return n


def hold_room(bench_dir: str, reserve: int, log: structlog.stdlib.BoundLogger) -> None:
    """Hold room on the disk for the next start (as much as there is, up to a cap)."""
    want = min(statedir.ROOM_BYTES, reserve)
    try:
        held = statedir.keep_room(bench_dir, want)
    except OSError as err:
        held = 0
        log.error("no room held for the next start", error=str(err))
    if held < want:
        log.warning("less room held for the next start", held=held, wanted=want)


def ack_damage(bench_dir: str, log: structlog.stdlib.BoundLogger, shown: int) -> int:
    """journal/ack: the damage reports are removed from disk (and so no longer shown);
    returns how many there were."""
    try:
        statedir.clear_damage(bench_dir)
    except OSError as err:
        raise WireError("io-error", f"the damage report could not be removed: {err}") from None
    log.info("journal damage acknowledged", reports=shown)
    return shown


def disk_health(bench_dir: str, full: bool, reserve: int) -> m.DiskHealth:
    try:
        st = os.statvfs(bench_dir)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = 0
    return m.DiskHealth(free=free, full=full, reserve=reserve)


def problem(err: BaseException) -> str:
    """One line, with its code, for what ends the daemon (the first error of a group)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    if isinstance(err, OSError):
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            where = err.filename or "BENCH_DIR"
            return f"the disk is full ({where}); free some space [disk-full]"
        return f"{err} [io-error]"
    if isinstance(err, WireError):
        return f"{err.message} [{err.code}]"
    if isinstance(err, sqlite3.Error):
        return f"a database could not be used: {err} (is the disk full?) [io-error]"
    return f"{err!r} [internal]"


def say(line: str) -> None:
    """One line to stderr; on a disk too full to take it, nothing (`bench up` then says
    how much room is left)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass
