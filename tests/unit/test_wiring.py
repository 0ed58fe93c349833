"""The daemon's services are built by `benchd.server.wiring.build` from the config and
what the start-up opened: every collaborator a constructor argument, and no I/O in the
building (no file opened, listed, made or removed, no database or socket, no program).

Python's audit hooks see every such call; the directory the config names stays empty.
"""

import functools
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from bench_wire import messages as m
from benchd.core.names import SYSTEM_WALL
from benchd.runtime.committer import EventOp, Op
from benchd.runtime.mailroom import SendOp
from benchd.runtime.nodes import Directory
from benchd.runtime.past import ExitedStore
from benchd.runtime.sessions import EXITED_KEPT
from benchd.runtime.system import JsonLog, setup_log
from benchd.server.options import DaemonConfig
from benchd.server.startup import Notices, refill_index
from benchd.server.wiring import Opened, Wired, build
from benchd.store import statedir
from benchd.store.eventlog import EventLog
from benchd.store.index import Index
from benchd.store.journal import Journal
from benchd.store.outbox import JobFiles

# What counts as I/O here: files and directories, databases, sockets, programs.
_IO = ("open", "os.", "shutil.", "sqlite3.", "socket.", "subprocess.", "pty.", "fcntl.")
_seen: list[str] | None = None  # the audit events while recording, else None


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _seen is not None and event.startswith(_IO):
        _seen.append(f"{event} {args!r}"[:200])


sys.addaudithook(_hook)  # cannot be removed; records only inside `recording`


@contextmanager
def recording() -> Iterator[list[str]]:
    global _seen
    _seen = found = []
    try:
        yield found
    finally:
        _seen = None


def _opened(state: str, bench_dir: str, config: DaemonConfig) -> Opened:
    """The stores opened in `state` (as the start-up opens them), for a daemon whose
    directory is `bench_dir`."""
    log = JsonLog(logging.getLogger("test_wiring"))
    notices = Notices(log)
    eventlog = EventLog(os.path.join(state, "events.jsonl"))
    journal = Journal(state, lambda: eventlog.fd, preallocate=False)
    journal.open()
    mail_root = os.path.join(state, "mail")
    index = Index(
        os.path.join(state, "index.sqlite"),
        notices.index,
        rebuild=functools.partial(refill_index, mail_root, eventlog, config.node, notices),
    )
    exited = ExitedStore(state, EXITED_KEPT, config.kept_scrollback)
    return Opened(
        bench_dir=bench_dir,
        pid=os.getpid(),
        subreaper=False,
        log=log,
        wall=SYSTEM_WALL,
        sandbox=None,
        isolation_note="isolation is off (--isolation off)",
        eventlog=eventlog,
        journal=journal,
        index=index,
        jobs=JobFiles(state),
        directory=Directory(os.path.join(state, "nodes.json"), config.node),
        exited_store=exited,
        past=(),
        damage=statedir.Damage(state, log, []),
    )


def _close(o: Opened) -> None:
    o.index.close()
    o.eventlog.close()
    o.journal.close()


def _tree(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _dirs, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(d, name))
            out[os.path.relpath(os.path.join(d, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def test_build_does_no_io(tmp_path):
    fresh, state = tmp_path / "fresh", tmp_path / "state"
    fresh.mkdir()
    state.mkdir()
    config = DaemonConfig(dir=str(fresh), node="n1", session_umask=0o022)
    opened = _opened(str(state), str(fresh), config)
    before = _tree(str(state))
    try:
        with recording() as io:
            wired = build(config, opened)
        assert io == [], "build did I/O:\n" + "\n".join(io)
        assert os.listdir(fresh) == []  # the daemon's own directory: nothing made
        assert _tree(str(state)) == before  # the stores: nothing written
        assert isinstance(wired, Wired)
    finally:
        _close(opened)


def test_every_service_is_built_with_its_collaborators(tmp_path):
    config = DaemonConfig(dir=str(tmp_path), node="n1", session_umask=0o022, approval_wait=7.0)
    opened = _opened(str(tmp_path), str(tmp_path), config)
    try:
        w = build(config, opened)
        svc = w.services
        # The mailroom checks the unread caps where a batch commits; the limiter asks
        # the same mailboxes the mailroom makes; the mailroom's ids are the start-up's.
        assert svc.mailroom.admit == svc.limiter.admit
        assert svc.limiter.mailbox_exists == svc.mailroom.mailboxes.exists
        assert svc.mailroom.clock is w.ids
        # Mail to other nodes: the job host's replies and the watch's stall mail.
        assert svc.jobs.outbound is svc.outbound
        assert svc.outbound.directory is opened.directory
        assert svc.jobs.files is opened.jobs
        # The sessions: delegation, deadlines and stalls, exited sessions, the umask.
        s = svc.sessions
        assert s.delegation is svc.spawner.delegation and s.reactor is w.reactor
        assert s.jobs is svc.jobs
        assert s.watch is not None and s.watch.outbound is svc.outbound
        assert s.watch.limiter is svc.limiter and s.watch.jobs is opened.jobs
        assert s.exited_store is opened.exited_store
        assert s.approval_wait == 7.0
        assert s.sandbox is None and s.session_umask == 0o022
        # The committer writes through the opened stores and tells the log what it lost.
        assert w.committer.index is opened.index and w.committer.on_lost is not None
        # The hub's listeners, in the order they hear a batch.
        assert svc.hub.listeners == [
            w.reactor.on_event,
            svc.states.on_event,
            svc.receipts.on_event,
            svc.waits.on_event,
        ]
        # What handlers see is the same objects.
        assert svc.index is opened.index and svc.eventlog is opened.eventlog
        assert svc.spawner.sessions is svc.sessions and svc.spawner.limiter is svc.limiter
        assert svc.info.bench_dir == str(tmp_path)
        assert not w.stop.is_set()
        svc.request_stop()
        assert w.stop.is_set()
    finally:
        _close(opened)


def test_notices_are_held_for_the_first_batch_then_queued():
    notices = Notices(JsonLog(logging.getLogger("test_wiring")))
    notices.add([m.DiskLow(free=1, reserve=2)])
    notices.index("index/rebuilt", reason="unreadable", messages=3)
    queued: list[Op[object]] = []
    held = notices.live(queued.append)
    assert [type(e) for e in held] == [m.DiskLow, m.IndexRebuilt]
    assert notices.held == []
    notices.index("index/failed", error="disk full", action="retry")
    assert len(queued) == 1 and isinstance(queued[0], EventOp)


def test_the_index_refills_itself_from_the_files_when_set_aside(tmp_path):
    """An index set aside while the daemon runs is refilled from the mail files by the
    `rebuild` the start-up opened it with, and says so."""
    config = DaemonConfig(dir=str(tmp_path), node="n1")
    opened = _opened(str(tmp_path), str(tmp_path), config)
    try:
        w = build(config, opened)

        async def send() -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(w.committer.run)
                mailroom = w.services.mailroom
                op = SendOp(mailroom, mailroom.check_send("operator", "bob", "body", "hi"))
                await w.committer.submit(op)
                nursery.cancel_scope.cancel()
            # In the run: the index reads trio's clock (its commit timing).
            opened.index.flush()
            assert opened.index.count("bob", None) == 1
            opened.index.recover_now("test")  # as after corruption found by a read
            assert opened.index.count("bob", None) == 1  # refilled from mail/bob
            assert opened.index.rebuilds == 1

        trio.run(send)
    finally:
        _close(opened)


def test_benchd_log_is_one_json_object_a_line(tmp_path):
    """benchd.log: the context, event, level and a UTC time stamped by the wall clock
    given; a value JSON cannot hold is written as its repr; `exception` adds the
    traceback being handled."""

    class Wall:
        def wall_ms(self) -> int:
            return 1_765_000_000_123

    path = tmp_path / "benchd.log"
    log = setup_log(str(path), Wall())
    log.info("ready", pid=7, where=tmp_path)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", op="send")
    for handler in logging.getLogger("benchd").handlers:
        handler.close()
    first, second = [json.loads(line) for line in path.read_text().splitlines()]
    assert first == {
        "pid": 7,
        "where": repr(tmp_path),
        "event": "ready",
        "level": "info",
        "timestamp": "2025-12-06T05:46:40.123Z",
    }
    assert (second["event"], second["level"], second["op"]) == ("failed", "error", "send")
    assert "ValueError: boom" in second["exception"]
