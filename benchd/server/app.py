"""benchd's entry point and the running daemon: connections, dispatch, signals, stop.

`main` runs the start-up in the order benchd/server/startup.py's header explains, and
stops in that order too; `Daemon` is what serves once the services run.
"""

import errno
import gc
import os
import signal
import sqlite3
import sys
from typing import TextIO

import trio

from bench_wire import messages as m
from bench_wire.client import socket_path
from bench_wire.errors import WireError
from benchd.core import authority
from benchd.core.authority import Caller, Refused
from benchd.core.names import OPERATOR
from benchd.core.trees import root_of
from benchd.runtime.placement import peer_of
from benchd.runtime.roster import Session
from benchd.server import startup
from benchd.server.connection import Connection
from benchd.server.handlers import HANDLERS
from benchd.server.options import DaemonConfig, build_parser, options_problem
from benchd.server.wiring import Opened, Wired, build
from benchd.store import statedir
from benchd.store.statedir import take_state_dir


def error_line(err: BaseException) -> str:
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


class Daemon:
    """The running daemon. Built from what the start-up opened and the services
    `build` made; its constructor only names them (no I/O)."""

    def __init__(
        self,
        config: DaemonConfig,
        opened: Opened,
        wired: Wired,
        notices: startup.Notices,
    ):
        self.config = config
        self.opened = opened
        self.wired = wired
        self.notices = notices
        # What each connection reads of its daemon (server/connection.py).
        self.log = opened.log
        self.caps = wired.services.info.caps
        self.svc = wired.services
        self.sock_path = socket_path(opened.bench_dir)
        self.sock_ino = 0
        self.connections: set[Connection] = set()  # open client connections (idle reaper)
        self._serve_scope = trio.CancelScope()
        self.stopping = False
        self.clean_stop = False

    # ------------------------------------------------------------ identity

    def by_token(self, token: str) -> Caller:
        s = self.svc.sessions.by_token(token)
        return Caller(s.handle, s)

    async def dispatch(self, conn: Connection, caller: Caller, req: m.Request) -> None:
        if self.stopping and not isinstance(req, m.Hello):
            raise WireError("shutting-down", "the daemon is stopping")
        # Every request type decodes to one handler (decode_request refuses an unknown
        # verb; tests/unit/test_handlers.py holds that each type has its handler).
        authority.check(caller, req, self.svc.roster.family)
        await HANDLERS[type(req)](self.svc, conn, caller, req)

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
                session = self.svc.sessions.placer.place(peer)
                peer_key = OPERATOR if session is None else session.id
                conn.placed = (
                    Caller(OPERATOR) if session is None else Caller(session.handle, session)
                )
            except WireError as err:  # unplaceable (benchd.runtime.placement)
                conn.placed, peer_key = err, "unplaceable"  # one bucket for all of them
            conn.sandboxed = session is not None and session.sandboxed
            # A session's connections count against its tree's too (--tree-connections).
            tree = None if session is None else root_of(session)
            refused = self.wired.admission.admit(peer_key, tree)
            if refused is not None:
                self._refused(conn.placed, refused, tree)
                await conn.send_error(None, "too-many-connections", f"{refused}; try again shortly")
                return
            try:
                await conn.serve_while(None if session is None else session.exited)
            finally:
                self.wired.admission.release(peer_key, tree)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure closes only it
            self.log.exception("connection failed", pid=pid)
        finally:
            peer.close()
            self.connections.discard(conn)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _refused(self, placed: Caller | WireError | None, why: Refused, tree: str | None) -> None:
        """A connection refused: written down (benchd.log, limit/hit) as one line per flood
        of its budget and peer, like every refusal a caller can loop on."""
        who = placed.handle if isinstance(placed, Caller) else "unplaceable"
        self.svc.limiter.refused(
            m.LimitHit(
                code="too-many-connections",
                sender=who,
                limit=why.limit,
                tree=tree,
                budget=f"connections:{why.budget}",
            )
        )

    async def run(self, ready_out: TextIO | None) -> None:
        """Steps 5-8 of the start-up (benchd/server/startup.py), then serve until stopped."""
        recovered_mail, recovered = startup.recover(self.opened, self.wired, self.notices)
        listener, self.sock_ino = await startup.claim_socket(
            self.opened.bench_dir, self.opened.pid, self.sock_path
        )
        async with trio.open_nursery() as nursery:
            await startup.start_services(
                nursery,
                self.config,
                self.opened,
                self.wired,
                self.notices,
                recovered_mail,
                recovered,
            )
            await nursery.start(self._signals)  # SIGTERM handled before anyone hears "ready"
            nursery.start_soon(self._reap_idle)
            await nursery.start(self._serve, listener)
            self.log.info("ready", pid=self.opened.pid, socket=self.sock_path, recovered=recovered)
            if self.opened.sandbox is None:
                self.log.warning("sessions not sandboxed", why=self.opened.isolation_note)
                say(f"benchd: {self.opened.isolation_note}")
            if ready_out is not None:
                print(
                    f"benchd ready pid={self.opened.pid} socket={self.sock_path}",
                    file=ready_out,
                    flush=True,
                )
            # After the ready line and off the loop: neither a start nor a request waits
            # for its write and flush.
            await trio.to_thread.run_sync(
                statedir.hold_room, self.opened.bench_dir, statedir.DISK_RESERVE, self.log
            )
            await self.wired.stop.wait()
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
                self.wired.stop.set()
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
        await self.svc.sessions.stop_all()
        await self.svc.jobs.stop()
        await self.wired.committer.record(
            m.DaemonStopped(pid=self.opened.pid)
        )  # a full disk: stop anyway
        await self.wired.committer.drain()
        self.svc.hub.followers.close()
        with trio.move_on_after(2.0):
            await self.svc.hub.streams_ended()
        self._serve_scope.cancel()
        self.wired.committer.closed = True
        self.opened.index.set_meta("last_seq", str(self.opened.eventlog.last_seq))
        await self.wired.committer.drain()  # what came in meanwhile, and the index's commit
        # The journal's checkpoint: a clean restart replays nothing.
        journal_ok = self.wired.committer.close()
        if not journal_ok:
            self.log.error("journal not checkpointed at stop; the next start replays it")
        self.clean_stop = not self.opened.index.pending  # sealed in main() once the index is closed
        self.log.info("stopped", pid=self.opened.pid)


def main(argv: list[str] | None = None) -> int:
    # 1. The one place the parser's Namespace is seen: everything after reads the config
    # (every option is a field of the same name; one without fails here, at once).
    # Every file the daemon makes is 0600 (the index and outbox hold mail subjects and
    # job tasks); sessions get the umask the daemon was started with back (the config's
    # session_umask, handed to each Terminal).
    config = DaemonConfig(**vars(build_parser().parse_args(argv)), session_umask=os.umask(0o077))
    problem = options_problem(config)
    if problem:
        print(f"benchd: {problem}", file=sys.stderr)
        return 2
    taken = take_state_dir(config.dir)  # 2. the lock
    if isinstance(taken, int):
        return taken  # refused, said in one line
    try:
        opened, notices = startup.open_state(taken, config)  # 3
    except WireError as err:  # isolation-unavailable
        say(f"benchd: cannot start: {err.message}")
        return 2
    except (OSError, sqlite3.Error) as err:
        say(f"benchd: cannot start: {error_line(err)}")
        return 3
    daemon = Daemon(config, opened, build(config, opened), notices)  # 4
    # What the start made (modules, types, the services, the recovered state) lives as
    # long as the run: out of the collector's sight, or each full collection scans it
    # all again (90-100 ms with the loop stopped, every few seconds under a steady
    # stream of sends, each send then waiting it out).
    gc.freeze()
    try:
        trio.run(daemon.run, sys.stdout)  # 5-8
    except KeyboardInterrupt:
        pass
    except Exception as err:  # noqa: BLE001 - one line, never a traceback
        daemon.log.error("stopped by an error", error=repr(err))
        say(f"benchd: stopped: {error_line(err)}")
        return 3
    finally:
        startup.close(opened, daemon.clean_stop)  # 9
    return 0


if __name__ == "__main__":
    sys.exit(main())
