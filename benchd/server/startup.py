"""Start-up: how benchd comes back from whatever the last run left, in order.

The files are the record (mail/, events.jsonl); the journal holds what a batch did
until the disk has it; the index is a cache of the files. A start may follow a clean
stop, a kill -9 at any instruction, a full disk or a person's edits, and ends serving
either way. `benchd.server.app.main` runs these steps in this order:

1. Options, parsed once into a `DaemonConfig`; the umask becomes 077 (the old one is
   each session's, `session_umask`).
2. The lock (`store/statedir.take_state_dir`); a second daemon for the dir is refused.
3. `open_state`, before any service exists: subreaper, benchd.log, the sandbox
   (`--isolation required` without bwrap refuses here); the room held for this start
   given back first, before anything writes; the journal replayed (`store/replay`),
   before the event log is opened, whose last seq never falls below the seqs replay
   cut; the journal opened empty (a disk/low notice if preallocation would eat the
   reserve); the unacknowledged damage; the index (a file SQLite cannot open is set
   aside; `refill_index` refills it whenever that happens while running); the job
   records (an old outbox.sqlite moved in first), the nodes seen, the exited sessions.
4. `build` (`server/wiring`): every service, with no I/O.
5. `recover`, on the loop but before the socket exists, so no one sees a half state:
   staging left by a crash removed; the search tables made or filled; the index
   checked (`store/recovery`: a clean stop's seal is trusted once, and then only the
   mailboxes whose names differ from the rows are listed again; without one, SQLite
   checks its b-trees and every mailbox is reconciled, mail the log announced getting
   no second mail/sent; any SQLite error sets the file aside and refills it); the
   delivery states replayed from the log; the id clock resumed after the newest id.
6. The socket (`claim_socket`): bound at a private name, made 0600, renamed over the
   path (whatever was there is stale: we hold the lock).
7. `start_services`: the journal's checkpoints, then the committer, whose first batch
   holds every notice of the start, the recovered mail's mail/sent and daemon/started;
   the reactor, the sessions, the job host (which first settles the jobs the last
   daemon left running and sends the replies still owed), the bridge when asked for.
8. `Daemon.run`: signals, the idle reaper, serving, the readiness line, then room held
   on the disk for the next start.
9. Stop (`Daemon._shutdown`, then `close`): new work refused, the sessions ended,
   daemon/stopped logged, the journal checkpointed, and the index sealed if nothing of
   it is pending (else closed unsealed, so the next start checks it in full).
"""

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable
from typing import Any

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.client import socket_path
from bench_wire.errors import WireError
from benchd import __version__
from benchd.core.names import SYSTEM_WALL, Log, id_ms
from benchd.runtime import sandbox
from benchd.runtime.committer import EventOp, Op
from benchd.runtime.nodes import Directory
from benchd.runtime.past import ExitedStore, PastSession
from benchd.runtime.sessions import EXITED_KEPT
from benchd.runtime.system import become_subreaper, setup_log
from benchd.runtime.tracking import MailStates
from benchd.server.options import DaemonConfig
from benchd.server.wiring import Opened, Wired
from benchd.store import recovery, statedir
from benchd.store.eventlog import EventLog
from benchd.store.index import Index, is_corrupt
from benchd.store.journal import Journal
from benchd.store.outbox import JobFiles
from benchd.store.recovery import clean_staging, reconcile
from benchd.store.replay import Replayed, replay


class Notices:
    """What the daemon says about itself while it starts and runs (journal replay and
    damage, a disk below its reserve, index failures and rebuilds): each is logged to
    benchd.log at once; its event is held for the start's first batch until the
    committer runs (`live`), then queued to the committer as it comes."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.held: list[m.Event] = []
        self._enqueue: Callable[[Op[object]], None] | None = None  # the committer's, once it runs

    def add(self, events: list[m.Event]) -> None:
        if self._enqueue is None:
            self.held += events
            return
        try:
            self._enqueue(EventOp(*events))
        except WireError:
            pass  # stopping: benchd.log has it

    def live(self, enqueue: Callable[[Op[object]], None]) -> list[m.Event]:
        """The committer runs: what was held (for the first batch), and from now on
        every notice goes to the committer."""
        held, self.held = self.held, []
        self._enqueue = enqueue
        return held

    def index(self, kind: str, **fields: Any) -> None:
        """The index's `notify`: a failure or rebuild, to benchd.log and the event log."""
        if kind == "index/recovered":
            self.log.info("index commits work again", **fields)
            return
        if kind == "index/failed":
            self.log.error(kind, **fields)
            ev: m.Event = m.IndexFailed(**fields)
        else:
            self.log.warning(kind, **fields)
            ev = m.IndexRebuilt(**fields)
        self.add([ev])


def refill_index(
    mail_root: str, eventlog: EventLog, node: str, notices: Notices, index: Index
) -> None:
    """Refill an empty index from the files (Index.recover_now, while running): the
    mail, then the delivery states from the whole log (they went with the file)."""
    reconcile(mail_root, index)
    MailStates(index, node).replay(eventlog.read_since(0))
    notices.index("index/rebuilt", reason=index.set_aside_reason or "", messages=len(index.pending))


# ---------------------------------------------------------------- 3. open_state


def replay_events(log: Log, replayed: Replayed) -> list[m.Event]:
    """benchd.log lines for a replay, and its journal/damaged events."""
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
    for ev in r.damage:
        log.error("journal damaged", **msgspec.structs.asdict(ev))
    return list(r.damage)


def low_events(log: Log, low: tuple[int, int] | None) -> list[m.Event]:
    """A disk/low event (and its log line) when preallocation gave way to the reserve."""
    if low is None:
        return []
    free, reserve = low
    log.warning("disk below its reserve: journal segments grow", free=free, reserve=reserve)
    return [m.DiskLow(free=free, reserve=reserve)]


def open_state(bench_dir: str, config: DaemonConfig) -> tuple[Opened, Notices]:
    """Step 3: what the services are built from, and the start's notices so far.
    Raises WireError when isolation is required and unavailable, OSError or
    sqlite3.Error when a file cannot be had."""
    # The one wall clock: every time written to disk or shown (benchd.core.names); the
    # timing rules read trio's clock, which the daemon sleeps on.
    wall = SYSTEM_WALL
    subreaper = become_subreaper()
    sock_path = socket_path(bench_dir)  # socket-path-too-long, before any file is made
    log = setup_log(os.path.join(bench_dir, "benchd.log"))
    notices = Notices(log)
    chosen, isolation_note = sandbox.choose(config.isolation, bench_dir, sock_path)
    statedir.release_room(bench_dir)
    log_path = os.path.join(bench_dir, "events.jsonl")
    replayed = replay(bench_dir, log_path)
    notices.add(replay_events(log, replayed))
    eventlog = EventLog(log_path, config.event_log_bytes)
    # Lines replay took back (a batch never committed) keep their seqs: none is handed
    # out twice.
    eventlog.last_seq = max(eventlog.last_seq, replayed.cut_seq)
    eventlog.published_seq = eventlog.last_seq
    journal = Journal(
        bench_dir,
        lambda: eventlog.fd,
        on_checkpoint_error=lambda err: log.error("journal checkpoint failed", error=str(err)),
        reserve=statedir.DISK_RESERVE,
        wall=wall,
    )
    journal.open()
    notices.add(low_events(log, journal.low))
    damage = statedir.Damage.load(bench_dir, log)
    mail_root = os.path.join(bench_dir, "mail")
    index = Index(
        os.path.join(bench_dir, "index.sqlite"),
        notices.index,
        rebuild=functools.partial(refill_index, mail_root, eventlog, config.node, notices),
    )
    exited_store = ExitedStore(bench_dir, EXITED_KEPT, config.kept_scrollback)
    opened = Opened(
        bench_dir=bench_dir,
        pid=os.getpid(),
        subreaper=subreaper,
        log=log,
        wall=wall,
        sandbox=chosen,
        isolation_note=isolation_note,
        eventlog=eventlog,
        journal=journal,
        index=index,
        jobs=JobFiles(bench_dir),
        directory=Directory(os.path.join(bench_dir, "nodes.json"), config.node, wall),
        exited_store=exited_store,
        past=tuple(PastSession(record, output) for record, output in exited_store.load()),
        damage=damage,
    )
    return opened, notices


# ---------------------------------------------------------------- 5. recover


def recover(opened: Opened, wired: Wired, notices: Notices) -> tuple[list[m.Event], bool]:
    """Step 5: bring the index in line with the files. Returns the mail/sent events
    of recovered mail, and whether this start recovered from anything (no clean stop).

    Start never fails because of the index: any SQLite error here sets the file aside
    and refills a new one from the files."""
    index, eventlog = opened.index, opened.eventlog
    log = opened.log
    mail_root = os.path.join(opened.bench_dir, "mail")
    clean_staging(
        mail_root,
        lambda path, why: log.warning("staging entry skipped", path=path, reason=why),
    )
    # The events whose delivery states the index holds (re-read: a set-aside index
    # holds none, and reconcile below moves last_seq on).
    states_seq = 0 if index.fresh else int(index.get_meta("last_seq") or 0)
    try:
        _ensure_search(index, mail_root, log)  # before reconcile, which indexes what it adds
        events, recovered = _reconcile_at_start(opened, mail_root)
    except sqlite3.Error as err:
        index.set_aside(f"unreadable at start: {err}")
        recovered = True
        events = reconcile(mail_root, index, Logged(eventlog, 0))
    if index.set_aside_reason is not None:  # at open or just now
        index.rebuilds += 1
        notices.index("index/rebuilt", reason=index.set_aside_reason, messages=len(index.pending))
        states_seq = 0
    wired.services.states.replay(eventlog.read_since(states_seq))
    index.flush()  # a failure is retried by the committer, like any other
    wired.ids.resume(index.newest_id())
    return list(events), recovered


def _reconcile_at_start(opened: Opened, mail_root: str) -> tuple[list[m.MailSent], bool]:
    idx = opened.index
    seal = recovery.take_seal(os.path.join(opened.bench_dir, recovery.SEAL))  # trusted once
    trusted = (
        not idx.fresh
        and recovery.seal_matches(seal, idx.path)
        and idx.get_meta("last_seq") == str(opened.eventlog.last_seq)
    )
    held = None
    if trusted:
        # The seal says the file is the one closed, not that nobody rewrote both: the
        # index's rows are read and checked against its counts (an edited index is set
        # aside and rebuilt) and against the directories' names.
        try:
            held = recovery.index_names(idx)
        except recovery.Edited as err:
            idx.set_aside(f"edited after its clean stop: {err}")
            _ensure_search(idx, mail_root, opened.log)  # the new file's tables; refilled below
    if held is not None:
        # The mailboxes whose names differ from the index's rows (mail a person dropped
        # in, moved or removed, or rows removed from the index) are listed again.
        changed = recovery.changed_boxes(mail_root, held)
        return (reconcile(mail_root, idx, frozenset(), changed) if changed else []), False
    recovered = not idx.fresh or os.path.isdir(mail_root)
    if not idx.fresh:
        # Not sealed: check the b-trees too (a crash start lists every mailbox anyway,
        # so this is the same order of work); damage found is a SQLite error -> rebuild.
        verdict = idx.quick_check()
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {verdict}")
    # Mail the log already announced but the index missed (a kill between the log
    # append and the index commit) needs no second, "recovered" mail/sent.
    since = int(idx.get_meta("last_seq") or 0)
    return reconcile(mail_root, idx, Logged(opened.eventlog, since)), recovered


def _ensure_search(index: Index, mail_root: str, log: Any) -> None:
    """The search tables, filled for messages indexed before search existed. A lock or
    a full disk only postpones this to the next start (new mail is added to them as it
    is indexed); damage is an index error like any other: set aside, rebuilt."""
    try:
        recovery.ensure_search(index, mail_root)
    except sqlite3.Error as err:
        if is_corrupt(err):
            raise
        log.warning("search tables not checked at start", error=str(err))


class Logged:
    """The mail the event log announced after a seq: the ids of its mail/sent events,
    and, where the log's history from that seq was dropped by its rotation
    (benchd.store.eventlog), all mail sent before its first kept event (ids carry their
    send time): announced then, in the file that went. Such mail gets no second,
    "recovered" mail/sent when an index is rebuilt."""

    def __init__(self, eventlog: EventLog, since: int) -> None:
        self.ids: set[str] = set()
        self.before = 0  # wall ms: mail sent earlier was announced in dropped history
        first = True
        for e in eventlog.read_since(since):
            if first and e["seq"] > since + 1 and isinstance(e.get("ts"), int):
                self.before = e["ts"]
            first = False
            mail_id = e.get("mail_id")
            if e.get("kind") == "mail/sent" and isinstance(mail_id, str):
                self.ids.add(mail_id)

    def __contains__(self, mail_id: object) -> bool:
        if mail_id in self.ids:
            return True
        sent = id_ms(mail_id) if isinstance(mail_id, str) else None
        return sent is not None and sent < self.before


# ---------------------------------------------------------------- 6. the socket


async def claim_socket(bench_dir: str, pid: int, path: str) -> tuple[trio.SocketListener, int]:
    """Bind a new socket at a private name, make it 0600 and rename it over `path`
    (claiming the path atomically); returns its listener and the inode it has."""
    tmp = os.path.join(bench_dir, f".s{pid}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # an earlier daemon's of the same pid
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(tmp)
    os.chmod(tmp, 0o600)
    sock.listen(128)
    # We hold the lock, so whatever is at the real path is stale: replace it.
    os.rename(tmp, path)
    return trio.SocketListener(sock), os.stat(path).st_ino


# ---------------------------------------------------------------- 7. start_services


async def start_services(
    nursery: trio.Nursery,
    config: DaemonConfig,
    opened: Opened,
    wired: Wired,
    notices: Notices,
    recovered_mail: list[m.Event],
    recovered: bool,
) -> None:
    """Step 7: the journal's checkpoints, the committer, the start's first batch, then
    the services in order."""
    await nursery.start(opened.journal.run)
    committer = wired.committer
    await nursery.start(committer.run)
    spares = wired.services.mailroom.spares
    if spares is not None:
        await nursery.start(spares.run)
    start_events = notices.live(committer.enqueue) + recovered_mail
    op: Op[object] = EventOp(
        *start_events,
        m.DaemonStarted(pid=opened.pid, version=__version__, recovered=recovered),
    )
    try:
        await committer.submit(op)
    except WireError as err:
        # A full disk must not keep anyone from reading their mail: serve anyway (sends
        # answer disk-full until there is room).
        opened.log.error("start events not logged", error=err.message, code=err.code)
    opened.damage.keep(start_events)
    await nursery.start(wired.reactor.run)
    await nursery.start(wired.services.sessions.run)
    await nursery.start(wired.services.jobs.run)
    if config.bridge:
        from benchd.runtime.nodes import supervise

        await nursery.start(
            supervise,
            opened.bench_dir,
            wired.services.outbound.node,
            config.bridge,
            wired.helper_pids,
            opened.log,
        )


# ---------------------------------------------------------------- 9. close


def close(opened: Opened, clean_stop: bool) -> None:
    """After the loop: the index sealed after a clean stop (the next
    start trusts it once), else closed unsealed; the event log closed."""
    if clean_stop:
        recovery.seal(opened.index, os.path.join(opened.bench_dir, recovery.SEAL))
    else:
        opened.index.close()
    opened.eventlog.close()
