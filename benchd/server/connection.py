"""One client connection: framing, decoding, identity, and the answer to each line.

Bad input of any kind is answered with an error frame and the connection stays usable,
except an over-long line (answered, then closed: we cannot tell where the next frame
starts). An exception inside a handler is logged and answered as `internal`; it never
reaches the server. Each connection is its own task, so a slow or silent client only
ever blocks itself.
"""

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, Protocol

import trio

from bench_wire import messages as m
from bench_wire.clientproto import FrameTooLong, LineBuffer
from bench_wire.errors import WireError
from bench_wire.messages import (
    ErrorBody,
    ErrorResponse,
    Id,
    Request,
    Response,
    decode_request,
    encode_line,
    request_id_of,
)
from benchd.core.authority import Caller
from benchd.server.options import DaemonConfig

if TYPE_CHECKING:
    from benchd.core.names import Log

# How a stream run by `Connection.while_present` ended: its frames ran out ("done"),
# the client closed its end ("gone"), or the client's request ended it ("stopped").
Ending = Literal["done", "gone", "stopped"]
RECV_BYTES = 64 * 1024
YIELD_EVERY = 32  # frames sent without blocking before send() lets other tasks run


class SessionEnded(Exception):
    """The session this connection was placed as has ended: the connection closes."""


class Server(Protocol):
    """What a connection uses of the daemon (benchd.server.app.Daemon): its limits, who a
    peer is, and the dispatch of a request to its handler."""

    @property
    def caps(self) -> m.Caps: ...

    @property
    def config(self) -> DaemonConfig: ...

    @property
    def log(self) -> "Log": ...

    def by_token(self, token: str) -> Caller: ...

    async def dispatch(self, conn: "Connection", caller: Caller, req: Request) -> None: ...


class Connection:
    def __init__(self, daemon: Server, stream: trio.SocketStream, peer_pid: int):
        self.daemon = daemon
        self.stream = stream
        self.peer_pid = peer_pid
        # Who the peer is, placed once at accept (Daemon.serve_client): a session or the
        # operator, or the reason it is neither. It never changes for the connection's
        # life; a connection placed as a session is closed when that session ends.
        self.placed: Caller | WireError = WireError("unplaceable", "not placed yet")
        self.sandboxed = False  # placed by its session's PID namespace
        self.buffer = LineBuffer(daemon.caps.frame_bytes)
        self.lines: list[bytes] = []
        self.send_lock = trio.Lock()
        self._unyielded = 0  # frames sent since this connection last let others run
        self.waiting = trio.CancelScope()  # the wait for the next request (see serve)
        self.idle_since: float | None = None  # when that wait began (trio.current_time)

    # The socket is read and written with os.read/os.write on its fd, waiting through
    # trio.lowlevel only when it would block: trio's stream layer costs a checkpoint, a
    # conflict detector and a cancel scope per call, which measured about a fifth of the
    # daemon's CPU per request under 16 senders.

    async def send(self, msg: Response) -> None:
        data = encode_line(msg)
        if self.send_lock.locked():  # another task is part-way through a frame
            async with self.send_lock:
                await self._write_all(data)
            return
        # A frame written whole, without yielding, cannot interleave with another; only a
        # partial write takes the lock (at once, before yielding) for the rest.
        n = self._write(data)
        if n < len(data):
            self.send_lock.acquire_nowait()
            try:
                await self._write_all(memoryview(data)[n:])
            finally:
                self.send_lock.release()
            self._unyielded = 0
            return
        # A stream to a fast reader (events history) never blocks: yield now and then,
        # so one stream cannot hold the loop while other clients wait.
        self._unyielded += 1
        if self._unyielded >= YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.checkpoint()

    def _write(self, data: bytes | memoryview) -> int:
        fd = self.stream.socket.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the connection is closed")
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as err:  # EPIPE, ECONNRESET: the peer has gone
            raise trio.BrokenResourceError(str(err)) from err

    async def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = self._write(view)
            if n == 0:
                await trio.lowlevel.wait_writable(self.stream.socket.fileno())
            view = view[n:]

    async def send_error(
        self, rid: Id, code: str, message: str, retry_after: float | None = None
    ) -> None:
        await self.send(ErrorResponse(id=rid, error=ErrorBody(code, message, retry_after)))

    async def next_line(self) -> bytes | None:
        """The next complete line, or None at EOF. Raises FrameTooLong."""
        while not self.lines:
            fd = self.stream.socket.fileno()
            if fd < 0:
                return None
            try:
                data = os.read(fd, RECV_BYTES)
            except BlockingIOError:
                try:
                    await trio.lowlevel.wait_readable(fd)
                except trio.ClosedResourceError:
                    return None
                continue
            except OSError:  # ECONNRESET: the peer has gone
                return None
            if not data:
                return None
            self.lines.extend(self.buffer.feed(data))
        return self.lines.pop(0)

    async def next_request(self) -> Request | None:
        """The next decoded request, None at EOF; bad lines are answered here."""
        while True:
            try:
                line = await self.next_line()
            except FrameTooLong:
                await self.send_error(
                    None,
                    "frame-too-long",
                    f"a line may be at most {self.buffer.max_line} bytes; closing",
                )
                return None
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                return decode_request(line)
            except WireError as err:
                await self.send_error(request_id_of(line), err.code, err.message)

    async def while_present(
        self,
        stream: Callable[[], Awaitable[None]],
        on_request: Callable[[Request], Awaitable[bool]] | None = None,
    ) -> Ending:
        """Run `stream` (it sends the frames of a long answer: events -f, tail -f, attach,
        screen -f) for as long as the client stays, and say how it ended.

        The client is read meanwhile, so its leaving ends the stream at once rather than
        at the next frame written into a dead socket. With no `on_request` nothing it says
        is even decoded (a follow stream has no more to hear); with one, each request
        goes to it (bad lines are answered as always), and True from it ends the stream.
        """
        ending: Ending = "done"

        async def watch(scope: trio.CancelScope) -> None:
            nonlocal ending
            if on_request is None:
                while await self.next_line() is not None:
                    pass
                ending = "gone"
            else:
                while True:
                    req = await self.next_request()
                    if req is None:
                        ending = "gone"
                        break
                    if await on_request(req):
                        ending = "stopped"
                        break
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, nursery.cancel_scope)
            await stream()
            nursery.cancel_scope.cancel()
        return ending

    def caller(self, req: Request) -> Caller:
        placed = self.placed
        if req.token is not None:
            who = self.daemon.by_token(req.token)
            if (
                self.sandboxed
                and isinstance(placed, Caller)
                and placed.session is not None
                and placed.session is not who.session
            ):
                raise WireError(
                    "bad-token",
                    f"this process runs in session {placed.handle}'s sandbox; "
                    "another session's BENCH_TOKEN is not its to use",
                )
            return who
        if isinstance(placed, WireError):
            raise placed
        if placed.session is not None and not placed.session.live:
            raise SessionEnded
        return placed

    async def serve_while(self, ended: trio.Event | None) -> None:
        """Serve until the client leaves or, for a connection placed as a session, that
        session ends (`ended`): then it is closed, whatever it was doing, so a process
        that outlives its session keeps nothing of it."""
        if ended is None:
            await self.serve()
            return
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await ended.wait()
                self.daemon.log.info("connection of an ended session closed", pid=self.peer_pid)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await self.serve()
            nursery.cancel_scope.cancel()

    async def serve(self) -> None:
        log = self.daemon.log
        idle = self.daemon.config.idle_timeout
        while True:
            # Only the wait between requests is timed: a request in flight or an open
            # stream (events -f, tail -f, attach) is never idle. The daemon's idle reaper
            # (Daemon._reap_idle) cancels `self.waiting` once `idle_since` is too old: one
            # timer for all connections instead of a deadline set and cleared per request.
            with trio.CancelScope() as self.waiting:
                self.idle_since = trio.current_time()
                req = await self.next_request()
            self.idle_since = None
            if self.waiting.cancelled_caught:
                log.info("connection idle timeout", pid=self.peer_pid, seconds=idle)
                with trio.move_on_after(1.0):  # a client that reads nothing is not waited for
                    await self.send_error(
                        None, "idle-timeout", f"no request for {idle:g} s: closing the connection"
                    )
                return
            if req is None:
                return
            try:
                caller = self.caller(req)
                await self.daemon.dispatch(self, caller, req)
            except SessionEnded:
                log.info("connection of an ended session closed", pid=self.peer_pid)
                return
            except WireError as err:
                await self.send_error(req.id, err.code, err.message, err.retry_after)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            except Exception as err:  # noqa: BLE001 - one request's bug never ends the daemon
                log.exception("request failed", verb=type(req).__name__, pid=os.getpid())
                await self.send_error(
                    req.id,
                    "internal",
                    f"the daemon hit an internal error ({type(err).__name__}); "
                    "it was logged and the daemon is still serving",
                )
