"""benchd's entry point: options, the lock, recovery, the socket, and the task tree.

Start-up order matters: take the flock (one daemon per BENCH_DIR), open the event log
(recovering a torn tail), open the index (reconciling each mailbox whose message names
differ from the index's; any SQLite error sets it aside and rebuilds it), clean tmp/,
then claim the socket path atomically and print one readiness line. Stop: refuse new
work, end the sessions (their exits logged), log daemon/stopped, commit the index and
seal it (recovery.py), remove the socket.
"""

import dataclasses
import os
import signal
import sqlite3
import sys
from typing import Any, TextIO

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.framing import DEFAULT_FRAME_BYTES
from bench_wire.paths import socket_path
from benchd import __version__
from benchd.core import authority
from benchd.core.admission import OPERATOR_PEER, Admission
from benchd.core.caller import Caller
from benchd.core.clock import SYSTEM_WALL, WallClock
from benchd.core.delegation import DelegationLimits
from benchd.core.names import OPERATOR, IdClock
from benchd.runtime import sandbox
from benchd.runtime.committer import Committer, EventOp, JournalStore
from benchd.runtime.delegation import Delegation
from benchd.runtime.hub import Hub
from benchd.runtime.jobhost import JobHost
from benchd.runtime.jobwatch import JobWatch
from benchd.runtime.limiter import Limiter
from benchd.runtime.mailroom import (
    BODY_BYTES,
    LIST_DEFAULT,
    LIST_MAX,
    SUBJECT_CHARS,
    Mailroom,
)
from benchd.runtime.mailservice import MailService
from benchd.runtime.mailstates import MailStates
from benchd.runtime.outbound import Outbound
from benchd.runtime.past import PastSession
from benchd.runtime.peers import peer_of
from benchd.runtime.reactor import Reactor
from benchd.runtime.receipts import Receipts
from benchd.runtime.reconcile import clean_staging, reconcile
from benchd.runtime.roster import Roster, Session
from benchd.runtime.sessions import Sessions
from benchd.runtime.spawning import Spawner
from benchd.runtime.system import become_subreaper
from benchd.runtime.waits import Waits
from benchd.server import upkeep
from benchd.server.config import DaemonConfig
from benchd.server.connection import Connection
from benchd.server.handlers import HANDLERS
from benchd.server.lockdir import take_state_dir
from benchd.server.options import (
    build_parser,
    daemon_config,
    options_problem,
    reactor_settings,
    send_limits,
)
from benchd.server.services import BridgeDesk, DaemonInfo, Services
from benchd.store import recovery, room, search, threads
from benchd.store.eventlog import EventLog
from benchd.store.exited import ExitedStore
from benchd.store.index import Index, Pending, is_corrupt
from benchd.store.journal import Journal
from benchd.store.outbox import SqliteOutbox
from benchd.store.queries import MailQueries
from benchd.store.replay import replay

SCROLLBACK_BYTES = 1024 * 1024


class Daemon:
    def __init__(self, bench_dir: str, config: DaemonConfig):
        from benchd.server import daemonlog as logmod

        self.bench_dir = bench_dir
        self.config = config
        self.pid = os.getpid()
        # The one wall clock: every time written to disk or shown (benchd.core.clock);
        # the timing rules read trio's clock, which the daemon sleeps on.
        self.wall: WallClock = SYSTEM_WALL
        self.subreaper = become_subreaper()
        self.helper_pids: set[int] = set()  # its own children acting for the operator
        self.test_hooks = config.test_hooks
        self.sock_path = socket_path(bench_dir)
        self.log = logmod.setup(os.path.join(bench_dir, "benchd.log"))
        # The sessions' sandbox (None: off or unavailable, and why); `required` without a
        # working bwrap raises isolation-unavailable here, before anything is opened.
        self.sandbox, self.isolation_note = sandbox.choose(
            config.isolation, bench_dir, self.sock_path
        )
        limits = send_limits(config)
        self.caps = m.Caps(
            frame_bytes=DEFAULT_FRAME_BYTES,
            body_bytes=BODY_BYTES,
            subject_chars=SUBJECT_CHARS,
            list_cap=LIST_DEFAULT,
            list_max=LIST_MAX,
            connections=config.max_connections,
            scrollback_bytes=SCROLLBACK_BYTES,
            max_children=config.max_children,
            max_depth=config.max_depth,
            spawn_rate=config.spawn_rate,
            exited_kept=config.exited_kept,
            kept_scrollback_bytes=config.kept_scrollback,
            **dataclasses.asdict(limits),
            thread_max=threads.THREAD_MAX,
            isolation="on" if self.sandbox is not None else "off",
            isolation_note=self.isolation_note,
        )
        self.admission = Admission(
            config.max_connections,
            config.session_connections,
            config.operator_connections,
            config.operator_reserve,
        )
        self.hub = Hub(self.log)
        self.connections: set[Connection] = set()  # open client connections (idle reaper)
        log_path = os.path.join(bench_dir, "events.jsonl")
        # The room held for this start, given back before anything else writes.
        self.room_released = room.release(bench_dir)
        # Before anything reads the files or the log: put back what committed batches
        # did that may not have reached the disk (a crash; nothing after a clean stop).
        self.replayed = replay(bench_dir, log_path)
        self.start_notices: list[m.Event] = upkeep.replay_events(self.log, self.replayed)
        self.eventlog = EventLog(log_path)
        # Lines replay took back (a batch never committed) keep their seqs: none is
        # handed out twice.
        self.eventlog.last_seq = max(self.eventlog.last_seq, self.replayed.cut_seq)
        self.eventlog.published_seq = self.eventlog.last_seq
        self.journal = Journal(
            bench_dir,
            lambda: self.eventlog.fd,
            on_checkpoint_error=lambda err: self.log.error(
                "journal checkpoint failed", error=str(err)
            ),
            reserve=config.disk_reserve,
            wall=self.wall,
        )
        self.journal.open()
        self.start_notices += upkeep.low_events(self.log, self.journal.low)
        self.started = False
        self.clean_stop = False
        self.seal_path = os.path.join(bench_dir, recovery.SEAL)
        self.damage = upkeep.load_damage(bench_dir, self.log)  # not yet acknowledged
        self.index = Index(os.path.join(bench_dir, "index.sqlite"), self._index_notice)
        self.committer = Committer(
            JournalStore(self.eventlog, self.journal, self.wall), self.index, self.hub.publish
        )
        self.committer.on_lost = lambda events, err: self.log.error(
            "events not logged", kinds=[type(e).__name__ for e in events], error=err.message
        )
        self.limiter = Limiter(limits, self.index, self.committer, self.log)
        self.roster = Roster()
        self.mailroom = Mailroom(
            os.path.join(bench_dir, "mail"),
            self.index,
            self.committer,
            self.roster.is_live,
            wall=self.wall,
        )
        self.mailroom.admit = self.limiter.admit  # the unread caps, where a batch commits
        self.limiter.mailbox_exists = self.mailroom.exists  # a tree pays for new mailboxes
        self._stop = trio.Event()
        self._serve_scope = trio.CancelScope()
        self.stopping = False
        self.jobs = JobHost(
            SqliteOutbox(os.path.join(bench_dir, "outbox.sqlite")),
            self.roster.live_by_handle,
            self.mailroom,
            self.committer,
            self.index,
            self.caps.body_bytes,
            config.retry_base,
            self.log,
            wall=self.wall,
        )
        reactor = Reactor(
            self.roster.live_by_handle,
            self.mailroom,
            self.committer.record,
            reactor_settings(self.config),
            self.log,
            wall=self.wall,
        )
        self.hub.listeners.append(reactor.on_event)
        # After the reactor: the states of a batch's events join the index's pending
        # changes with the batch's last_seq (benchd.runtime.mailstates).
        self.mail_states = MailStates(self.index, config.node)
        self.hub.listeners.append(self.mail_states.on_event)
        # Receipts for mail from other nodes, for the bridge to send back to them.
        self.receipts = Receipts(self.index, config.node, self.log, self.wall)
        self.hub.listeners.append(self.receipts.on_event)
        self.waits = Waits(config.session_waits, config.max_waits, self.committer.record)
        self.hub.listeners.append(self.waits.on_event)
        self.sessions = Sessions(
            self.roster,
            reactor,
            self.jobs,
            self.committer.record,
            self.log,
            bench_dir,
            SCROLLBACK_BYTES,
            self.helper_pids,
            self.pid,
            self.subreaper,
            session_umask=config.session_umask,
            wall=self.wall,
        )
        self.sessions.sandbox = self.sandbox
        self.outbound = Outbound(
            bench_dir, config.node, self.index, self.mailroom, self.committer, self.wall
        )
        self.jobs.outbound = self.outbound  # job replies to handle@node go out through it
        self.delegation = Delegation(
            self.roster,
            self.mailroom,
            self.committer.record,
            self.log,
            DelegationLimits(config.max_children, config.max_depth, config.spawn_rate),
        )
        self.sessions.delegation = self.delegation
        self.sessions.watch = JobWatch(
            self.committer.record,
            self.committer,
            self.mailroom,
            self.limiter,
            self.jobs.outbox,
            self.sessions.end,
            self.log,
            config.stall_after,
            config.max_deadline,
            wall=self.wall,
        )
        self.sessions.watch.outbound = self.outbound
        self.sessions.exited_kept = config.exited_kept
        self.sessions.exited_store = ExitedStore(
            bench_dir, config.exited_kept, config.kept_scrollback
        )
        for record, output in self.sessions.exited_store.load():
            self.roster.exited.append(PastSession(record, output))
        self.index_queries = MailQueries(self.index)
        self.services = Services(
            info=DaemonInfo(
                self.pid,
                bench_dir,
                self.caps,
                reactor_settings(self.config),
                self.test_hooks,
                config.wait_max,
            ),
            request_stop=self.request_stop,
            mail=MailService(self.mailroom, self.outbound, self.index, self.index_queries),
            mailroom=self.mailroom,
            index=self.index,
            queries=self.index_queries,
            roster=self.roster,
            sessions=self.sessions,
            spawner=Spawner(
                self.sessions, self.jobs, self.delegation, self.limiter, self.committer.submit
            ),
            jobs=self.jobs,
            outbound=self.outbound,
            hub=self.hub,
            eventlog=self.eventlog,
            limiter=self.limiter,
            disk_health=self.disk_health,
            damage=lambda: self.damage,
            ack_damage=self.ack_damage,
            bridge=BridgeDesk(self.committer.enqueue, self.committer.record, self.log),
            states=self.mail_states,
            waits=self.waits,
            receipts=self.receipts,
        )

    # ------------------------------------------------------------ recovery

    def recover(self) -> list[m.Event]:
        """Bring the index in line with the files; returns events to log at start.

        Start never fails because of the index: any SQLite error here sets the file aside
        and refills a new one from the files."""
        mail_root = os.path.join(self.bench_dir, "mail")
        clean_staging(
            mail_root,
            lambda path, why: self.log.warning("staging entry skipped", path=path, reason=why),
        )
        self.index.rebuild = self._rebuild_index
        # The events whose delivery states the index holds (re-read: a set-aside index
        # holds none, and reconcile below moves last_seq on).
        states_seq = 0 if self.index.fresh else int(self.index.get_meta("last_seq") or 0)
        try:
            self._ensure_search(mail_root)  # before reconcile, which indexes what it adds
            events = self._reconcile_at_start(mail_root)
        except sqlite3.Error as err:
            self.index.set_aside(f"unreadable at start: {err}")
            self.index.pending = Pending()
            self.recovered = True
            events = reconcile(mail_root, self.index, self._logged_since(0))
        if self.index.set_aside_reason is not None:  # at open or just now
            self.index.rebuilds += 1
            self._index_notice(
                "index/rebuilt",
                reason=self.index.set_aside_reason,
                messages=len(self.index.pending),
            )
        if self.index.set_aside_reason is not None:
            states_seq = 0
        self.mail_states.replay(self.eventlog.read_since(states_seq))
        self.index.flush()  # a failure is retried by the committer, like any other
        self.mailroom.clock = IdClock(self.index.newest_id())
        return self.start_notices + events

    def _reconcile_at_start(self, mail_root: str) -> list[m.MailSent]:
        idx = self.index
        seal = recovery.take_seal(self.seal_path)  # one start trusts a seal, at most
        trusted = (
            not idx.fresh
            and recovery.seal_matches(seal, self.index.path)
            and idx.get_meta("last_seq") == str(self.eventlog.last_seq)
        )
        held = None
        if trusted:
            # The seal says the file is the one closed, not that nobody rewrote both:
            # the index's rows are read and checked against its counts (an edited index
            # is set aside and rebuilt) and against the directories' names.
            try:
                held = recovery.index_digests(idx)
            except recovery.Edited as err:
                idx.set_aside(f"edited after its clean stop: {err}")
                idx.pending = Pending()  # what was queued for the file set aside
                self._ensure_search(mail_root)  # the new file's tables; refilled below
        if held is not None:
            self.recovered = False
            # The mailboxes whose names differ from the index's rows (mail a person
            # dropped in, moved or removed, or rows removed from the index) are listed
            # again.
            changed = recovery.changed_boxes(mail_root, held)
            return reconcile(mail_root, idx, frozenset(), changed) if changed else []
        self.recovered = not idx.fresh or os.path.isdir(mail_root)
        if not idx.fresh:
            # Not sealed: check the b-trees too (a crash start lists every mailbox anyway,
            # so this is the same order of work); damage found is a SQLite error -> rebuild.
            verdict = idx.quick_check()
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {verdict}")
        # Mail the log already announced but the index missed (a kill between the log
        # append and the index commit) needs no second, "recovered" mail/sent.
        since = int(idx.get_meta("last_seq") or 0)
        return reconcile(mail_root, idx, self._logged_since(since))

    def _ensure_search(self, mail_root: str) -> None:
        """The search tables, filled for messages indexed before search existed. A lock
        or a full disk only postpones this to the next start (new mail is added to them
        as it is indexed); damage is an index error like any other: set aside, rebuilt."""
        try:
            search.ensure(self.index, mail_root)
        except sqlite3.Error as err:
            if is_corrupt(err):
                raise
            self.log.warning("search tables not checked at start", error=str(err))

    def _logged_since(self, since: int) -> set[str]:
        log = self.eventlog.read_since(since)
        sent = (e.get("mail_id") for e in log if e.get("kind") == "mail/sent")
        return {mail_id for mail_id in sent if isinstance(mail_id, str)}

    def _rebuild_index(self) -> None:
        """Refill an empty index from the files (Index.recover_now, while running)."""
        reconcile(os.path.join(self.bench_dir, "mail"), self.index)
        self.mail_states.replay(self.eventlog.read_since(0))  # the states went with the file
        self._index_notice(
            "index/rebuilt",
            reason=self.index.set_aside_reason or "",
            messages=len(self.index.pending),
        )

    def _index_notice(self, kind: str, **fields: Any) -> None:
        """An index failure or rebuild: to benchd.log, and to the event log."""
        if kind == "index/recovered":
            self.log.info("index commits work again", **fields)
            return
        if kind == "index/failed":
            self.log.error(kind, **fields)
            ev: m.Event = m.IndexFailed(**fields)
        else:
            self.log.warning(kind, **fields)
            ev = m.IndexRebuilt(**fields)
        committer = getattr(self, "committer", None)
        if committer is None or not self.started:
            self.start_notices.append(ev)
            return
        try:
            committer.enqueue(EventOp(ev))
        except WireError:
            pass  # stopping: benchd.log has it

    def ack_damage(self) -> int:
        n = upkeep.ack_damage(self.bench_dir, self.log, len(self.damage))
        self.damage = []
        return n

    def disk_health(self) -> m.DiskHealth:
        return upkeep.disk_health(
            self.bench_dir, self.committer.disk_full, self.config.disk_reserve
        )

    # ------------------------------------------------------------ identity

    def by_token(self, token: str) -> Caller:
        s = self.sessions.by_token(token)
        return Caller(s.handle, s)

    async def dispatch(self, conn: Connection, caller: Caller, req: m.Request) -> None:
        if self.stopping and not isinstance(req, m.Hello):
            raise WireError("shutting-down", "the daemon is stopping")
        handler = HANDLERS.get(type(req))
        if handler is None:
            raise WireError("unknown-verb", f"{req.__struct_config__.tag} is not valid here")
        authority.check(caller, req, self.roster.family)
        await handler(self.services, conn, caller, req)

    def request_stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------ serving

    async def serve_client(self, stream: trio.SocketStream) -> None:
        try:
            peer = peer_of(stream.socket)
        except OSError:
            await stream.aclose()
            return
        pid = peer.pid
        conn = Connection(self, stream, pid)
        self.connections.add(conn)
        try:
            if peer.uid != os.getuid():
                self.log.warning("peer refused", uid=peer.uid, pid=pid)
                await conn.send_error(
                    None, "peer-refused", "connections are accepted only from the daemon's own user"
                )
                return
            # Placed once, now: requests may still carry a token, but the peer itself is
            # never looked up again (a pid outlives nothing it could be trusted for).
            session: Session | None = None
            try:
                session = self.sessions.place(peer)
                peer_key = OPERATOR_PEER if session is None else session.id
                conn.placed = (
                    Caller(OPERATOR) if session is None else Caller(session.handle, session)
                )
            except WireError as err:  # unplaceable (benchd.runtime.placement)
                conn.placed, peer_key = err, "unplaceable"  # one bucket for all of them
            conn.sandboxed = session is not None and session.sandboxed
            refused = self.admission.admit(peer_key)
            if refused is not None:
                self.log.warning("connection refused", peer=peer_key, pid=pid, reason=refused)
                await conn.send_error(None, "too-many-connections", f"{refused}; try again shortly")
                return
            try:
                await conn.serve_while(None if session is None else session.exited)
            finally:
                self.admission.release(peer_key)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure closes only it
            self.log.exception("connection failed", pid=pid)
        finally:
            peer.close()
            self.connections.discard(conn)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _private_socket(self) -> tuple[trio.socket.SocketType, str]:
        """A new socket and the private name it binds first (run() then chmods it and
        renames it over the real path: claiming the path atomically)."""
        tmp = os.path.join(self.bench_dir, f".s{self.pid}")
        if os.path.exists(tmp):
            os.unlink(tmp)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        return sock, tmp

    async def run(self, ready_out: TextIO | None) -> None:
        start_events = self.recover()
        sock, tmp = self._private_socket()
        await sock.bind(tmp)
        os.chmod(tmp, 0o600)
        sock.listen(128)
        # We hold the lock, so whatever is at the real path is stale: replace it.
        os.rename(tmp, self.sock_path)
        self.sock_ino = os.stat(self.sock_path).st_ino
        listener = trio.SocketListener(sock)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            await nursery.start(self.committer.run)
            self.started = True
            try:
                await self.committer.submit(
                    EventOp(
                        *start_events,
                        m.DaemonStarted(
                            pid=self.pid, version=__version__, recovered=self.recovered
                        ),
                    )
                )
            except WireError as err:
                # A full disk must not keep anyone from reading their mail: serve anyway
                # (sends answer disk-full until there is room).
                self.log.error("start events not logged", error=err.message, code=err.code)
            self.damage += upkeep.keep_damage(self.bench_dir, self.log, start_events)
            await nursery.start(self.sessions.reactor.run)
            await nursery.start(self.sessions.run)
            await nursery.start(self.jobs.run)
            if self.config.bridge:
                from benchd.runtime.bridgehost import supervise

                await nursery.start(
                    supervise,
                    self.bench_dir,
                    self.outbound.node,
                    self.config.bridge,
                    self.helper_pids,
                    self.log,
                )
            await nursery.start(self._signals)  # SIGTERM handled before anyone hears "ready"
            nursery.start_soon(self._reap_idle)
            await nursery.start(self._serve, listener)
            self.log.info("ready", pid=self.pid, socket=self.sock_path, recovered=self.recovered)
            if self.sandbox is None:
                self.log.warning("sessions not sandboxed", why=self.isolation_note)
                upkeep.say(f"benchd: {self.isolation_note}")
            if ready_out is not None:
                print(
                    f"benchd ready pid={self.pid} socket={self.sock_path}",
                    file=ready_out,
                    flush=True,
                )
            # After the ready line and off the loop: neither a start nor a request waits
            # for its write and flush.
            await trio.to_thread.run_sync(
                upkeep.hold_room, self.bench_dir, self.config.disk_reserve, self.log
            )
            await self._stop.wait()
            await self._shutdown(listener)
            nursery.cancel_scope.cancel()

    async def _serve(
        self,
        listener: trio.SocketListener,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with self._serve_scope:
            await trio.serve_listeners(self.serve_client, [listener], task_status=task_status)

    async def _reap_idle(self) -> None:
        """Close connections that waited `--idle-timeout` seconds for a request: checked a
        few times per timeout, so one closes at most a tenth of it late."""
        idle = self.config.idle_timeout
        while True:
            await trio.sleep(min(max(idle / 10, 0.05), 5.0))
            cutoff = trio.current_time() - idle
            for conn in list(self.connections):
                since = conn.idle_since
                if since is not None and since <= cutoff:
                    conn.waiting.cancel()

    async def _signals(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            task_status.started()
            async for _ in sigs:
                self.request_stop()
                return

    async def _shutdown(self, listener: trio.SocketListener) -> None:
        self.stopping = True
        try:
            if os.stat(self.sock_path).st_ino == self.sock_ino:
                os.unlink(self.sock_path)
        except OSError:
            pass
        # Connections stay up (new requests get shutting-down; the socket path is gone
        # so no one new arrives) until followers have seen the sessions end and
        # daemon/stopped, and their streams' end frames are sent.
        await self.sessions.stop_all()
        await self.jobs.stop()
        await self.committer.record(m.DaemonStopped(pid=self.pid))  # a full disk: stop anyway
        await self.committer.drain()
        self.hub.followers.close()
        with trio.move_on_after(2.0):
            await self.hub.streams_ended()
        self._serve_scope.cancel()
        self.committer.closed = True
        self.index.set_meta("last_seq", str(self.eventlog.last_seq))
        await self.committer.drain()  # what came in meanwhile, and the index's commit
        # The journal's checkpoint: a clean restart replays nothing.
        journal_ok = self.committer.close()
        if not journal_ok:
            self.log.error("journal not checkpointed at stop; the next start replays it")
        self.clean_stop = not self.index.pending  # sealed in main() once the index is closed
        self.log.info("stopped", pid=self.pid)


def main(argv: list[str] | None = None) -> int:
    # The one place the parser's Namespace is seen: everything after reads the config.
    # Every file the daemon makes is 0600 (the index and outbox hold mail subjects and
    # job tasks); sessions get the umask the daemon was started with back (the config's
    # session_umask, handed to each Terminal).
    config = daemon_config(build_parser().parse_args(argv), session_umask=os.umask(0o077))
    problem = options_problem(config)
    if problem:
        print(f"benchd: {problem}", file=sys.stderr)
        return 2
    taken = take_state_dir(config.dir)
    if isinstance(taken, int):
        return taken  # refused, said in one line
    bench_dir = taken
    try:
        daemon = Daemon(bench_dir, config)
    except WireError as err:  # isolation-unavailable
        upkeep.say(f"benchd: cannot start: {err.message}")
        return 2
    except (OSError, sqlite3.Error) as err:
        upkeep.say(f"benchd: cannot start: {upkeep.problem(err)}")
        return 3
    try:
        trio.run(daemon.run, sys.stdout)
    except KeyboardInterrupt:
        pass
    except Exception as err:  # noqa: BLE001 - one line, never a traceback
        daemon.log.error("stopped by an error", error=repr(err))
        upkeep.say(f"benchd: stopped: {upkeep.problem(err)}")
        return 3
    finally:
        daemon.jobs.outbox.close()
        if daemon.clean_stop:
            recovery.seal(daemon.index, daemon.seal_path)
        else:
            daemon.index.close()
        daemon.eventlog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
