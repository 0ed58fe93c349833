"""benchd's entry point: options, the lock, recovery, the socket, and the task tree.

Start-up order matters: take the flock (one daemon per BENCH_DIR), open the event log
(recovering a torn tail), open the index (reconciling it against the files unless the
last stop was clean), clean tmp/, then claim the socket path atomically and print one
readiness line. Stop: refuse new work, end the sessions (their exits logged), log
daemon/stopped, mark the index clean, remove the socket.
"""

import argparse
import fcntl
import os
import signal
import sys

import trio

from bench_wire import messages as m
from bench_wire.config import DAEMON_OPTIONS, option_dest
from bench_wire.errors import WireError
from bench_wire.framing import DEFAULT_FRAME_BYTES
from bench_wire.paths import resolve_dir, socket_path
from benchd import __version__, mailverbs, screens, search
from benchd.committer import Committer, EventOp
from benchd.connection import Caller, Connection
from benchd.dispatch import HANDLERS
from benchd.eventlog import EventLog
from benchd.hub import Hub
from benchd.index import Index
from benchd.mailroom import (
    BODY_BYTES,
    LIST_CAP,
    LIST_MAX,
    SUBJECT_CHARS,
    Mailroom,
    clean_staging,
    reconcile,
)
from benchd.names import OPERATOR, IdClock
from benchd.system import ensure_private_dir, peer_credentials

SCROLLBACK_BYTES = 1024 * 1024


class Daemon:
    def __init__(self, bench_dir: str, opts: argparse.Namespace):
        from benchd import log as logmod

        self.bench_dir = bench_dir
        self.opts = opts
        self.pid = os.getpid()
        self.test_hooks = bool(opts.test_hooks)
        self.sock_path = socket_path(bench_dir)
        self.log = logmod.setup(os.path.join(bench_dir, "benchd.log"))
        self.caps = m.Caps(
            frame_bytes=DEFAULT_FRAME_BYTES,
            body_bytes=BODY_BYTES,
            subject_chars=SUBJECT_CHARS,
            list_cap=LIST_CAP,
            list_max=LIST_MAX,
            connections=opts.max_connections,
            scrollback_bytes=SCROLLBACK_BYTES,
        )
        self.connections = 0
        self.hub = Hub(self.log)
        self.eventlog = EventLog(os.path.join(bench_dir, "events.jsonl"))
        self.index = Index(os.path.join(bench_dir, "index.sqlite"))
        self.committer = Committer(self.eventlog, self.index, self.hub.publish, bench_dir)
        self.committer.on_lost = lambda events, err: self.log.error(
            "events not logged", kinds=[type(e).__name__ for e in events], error=err.message)
        self.mailroom = Mailroom(os.path.join(bench_dir, "mail"), self.index, self.committer)
        self._stop = trio.Event()
        self._serve_scope = trio.CancelScope()
        self.stopping = False
        self.handlers = dict(HANDLERS)
        self.handlers.update(mailverbs.HANDLERS | screens.HANDLERS)
        from benchd.sessions import Sessions

        self.sessions = Sessions(self)
        self.mailroom.is_live = self.sessions.is_live
        self.handlers.update(self.sessions.handlers())
        from benchd.jobhost import JobHost, report_verb

        self.jobs = JobHost(self)
        self.sessions.jobs = self.jobs
        self.handlers[m.JobReport] = report_verb

    # ------------------------------------------------------------ recovery

    def recover(self) -> list:
        """Bring the index in line with the files; returns events to log at start."""
        mail_root = os.path.join(self.bench_dir, "mail")
        clean_staging(mail_root)
        search.ensure(self.index, mail_root)  # before reconcile, which indexes what it adds
        clean = (
            not self.index.fresh
            and self.index.get_meta("clean") == "1"
            and self.index.get_meta("last_seq") == str(self.eventlog.last_seq)
        )
        self.recovered = not clean and (not self.index.fresh or os.path.isdir(mail_root))
        events = []
        if not clean:
            # Mail the log already announced but the index missed (a kill between the log
            # append and the index commit) needs no second, "recovered" mail/sent.
            since = int(self.index.get_meta("last_seq") or 0)
            logged = {e.get("mail_id") for e in self.eventlog.read_since(since)
                      if e.get("kind") == "mail/sent"}
            events = reconcile(mail_root, self.index, logged)
        self.index.set_meta("clean", "0")  # until the next clean stop says otherwise
        self.mailroom.clock = IdClock(self.index.newest_id_w())
        return events

    # ------------------------------------------------------------ identity

    def identify(self, token: str | None, peer_pid: int) -> Caller:
        return self.sessions.identify(token, peer_pid) or Caller(OPERATOR)

    def live_session_count(self) -> int:
        return self.sessions.live_count()

    def reactor_info(self) -> m.Reactor:
        o = self.opts
        return m.Reactor(
            idle_gate=o.idle_gate,
            paste_settle=o.paste_settle,
            wake_burst=o.wake_burst,
            wake_refill=o.wake_refill,
            enter_retries=o.enter_retries,
        )

    async def dispatch(self, conn: Connection, caller: Caller, req) -> None:
        if self.stopping and not isinstance(req, m.Hello):
            raise WireError("shutting-down", "the daemon is stopping")
        handler = self.handlers.get(type(req))
        if handler is None:
            raise WireError("unknown-verb", f"{req.__struct_config__.tag} is not valid here")
        await handler(self, conn, caller, req)

    def request_stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------ serving

    async def serve_client(self, stream: trio.SocketStream) -> None:
        try:
            pid, uid, _gid = peer_credentials(stream.socket)
        except OSError:
            await stream.aclose()
            return
        conn = Connection(self, stream, pid)
        try:
            if uid != os.getuid():
                self.log.warning("peer refused", uid=uid, pid=pid)
                await conn.send_error(None, "peer-refused",
                                      "connections are accepted only from the daemon's own user")
                return
            if self.connections >= self.caps.connections:
                await conn.send_error(
                    None, "too-many-connections",
                    f"the daemon is at its limit of {self.caps.connections} connections; "
                    "try again shortly",
                )
                return
            self.connections += 1
            try:
                await conn.serve()
            finally:
                self.connections -= 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure closes only it
            self.log.exception("connection failed", pid=pid)
        finally:
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

    async def run(self, ready_out) -> None:
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
            await self.committer.submit(
                EventOp(*start_events, m.DaemonStarted(pid=self.pid, version=__version__,
                                                       recovered=self.recovered))
            )
            await self.sessions.start(nursery)
            await self.jobs.start(nursery)
            await nursery.start(self._signals)  # SIGTERM handled before anyone hears "ready"
            nursery.start_soon(self._serve, listener)
            self.log.info("ready", pid=self.pid, socket=self.sock_path, recovered=self.recovered)
            if ready_out is not None:
                print(f"benchd ready pid={self.pid} socket={self.sock_path}", file=ready_out,
                      flush=True)
            await self._stop.wait()
            await self._shutdown(listener)
            nursery.cancel_scope.cancel()

    async def _serve(self, listener) -> None:
        with self._serve_scope:
            await trio.serve_listeners(self.serve_client, [listener])

    async def _signals(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
            task_status.started()
            async for _ in sigs:
                self.request_stop()
                return

    async def _shutdown(self, listener) -> None:
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
        await self.committer.submit(EventOp(m.DaemonStopped(pid=self.pid)))
        await self.committer.drain()
        for follower in list(self.hub.followers):
            follower.close()
        with trio.move_on_after(2.0):
            while self.hub.streams:
                await trio.sleep(0.01)
        self._serve_scope.cancel()
        self.committer.closed = True
        await self.committer.drain()  # what came in meanwhile, and the index's commit
        if not self.committer.index_dirty:
            self.index.set_meta("last_seq", str(self.eventlog.last_seq))
            self.index.set_meta("clean", "1")
        self.log.info("stopped", pid=self.pid)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchd", description="the bench daemon")
    p.add_argument("--dir", help="BENCH_DIR (else $BENCH_DIR, else the per-user default)")
    for flag, env, typ, default, help_ in DAEMON_OPTIONS:
        raw = os.environ.get(env)
        value = default
        if raw is not None:
            try:
                value = typ(raw)
            except ValueError:
                p.error(f"{env}={raw!r} is not a valid {typ.__name__}")
        p.add_argument(flag, type=typ, default=value, dest=option_dest(flag),
                       help=f"{help_} (env {env}, default {default})")
    p.add_argument("--test-hooks", action="store_true",
                   help="enable the debug/fault verb (tests only)")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    for flag, _env, _typ, _default, _h in DAEMON_OPTIONS:
        v = getattr(opts, option_dest(flag))
        if v < 0 or (flag == "--wake-refill" and v <= 0) or (flag == "--max-connections" and v < 1):
            print(f"benchd: {flag} must be positive (got {v})", file=sys.stderr)
            return 2
    try:
        bench_dir = resolve_dir(opts.dir)
        socket_path(bench_dir)
        ensure_private_dir(bench_dir)
    except WireError as err:
        print(f"benchd: {err.message}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"benchd: cannot use {opts.dir or bench_dir}: {err}", file=sys.stderr)
        return 2
    lock_fd = os.open(os.path.join(bench_dir, "benchd.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"benchd: another benchd already serves {bench_dir}", file=sys.stderr)
        return 1
    os.ftruncate(lock_fd, 0)
    os.write(lock_fd, f"{os.getpid()}\n".encode())
    daemon = Daemon(bench_dir, opts)
    try:
        trio.run(daemon.run, sys.stdout)
    except KeyboardInterrupt:
        pass
    finally:
        daemon.jobs.outbox.close()
        daemon.index.close()
        daemon.eventlog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

