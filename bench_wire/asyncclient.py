"""The asyncio shell of the client protocol (ARCHITECTURE.md, "One typed client"): the
dashboard, MCP and the bridge. It connects and checks the peer as the blocking shell
does, so every client reports the same failures in the same words.
"""

from __future__ import annotations

import asyncio
import socket
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Self, TypedDict, TypeVar, Unpack, overload

from bench_wire.client import JSON, broke, check_peer, resolve_dir, socket_path, unreachable
from bench_wire.clientproto import ANSWER_BYTES, Answer, ClientProtocol
from bench_wire.errors import Disconnected, WireError

if TYPE_CHECKING:
    from bench_wire.clientproto import Codec, Id
    from bench_wire.messages import Request, Response

T = TypeVar("T")
R = TypeVar("R", bound="Response")

RECV_BYTES = 1 << 16
# After a failed write, how long to look for the answer the daemon may have sent before
# it closed (too-many-connections, frame-too-long): it says more than "broken pipe".
LAST_WORDS_S = 1.0
# KeptClient: how often one call opens a new connection and sends again.
ATTEMPTS = 3


class Options(TypedDict, total=False):
    """An AsyncClient's keyword options (a KeptClient passes them to each connection)."""

    codec: Codec
    timeout: float | None
    max_line: int


class _Scoped(ABC):
    """`async with client:` connects on entry (the client itself) and closes on exit."""

    @abstractmethod
    async def connect(self) -> Self: ...

    @abstractmethod
    def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Scoped):
    """One connection to the daemon. `async with AsyncClient(dir) as c: await c.call(r)`.

    Requests on one connection take turns (the daemon answers a connection's requests
    one at a time anyway), and answers are matched to requests by id: the late answer
    to a call whose caller was cancelled is dropped, never handed to the next caller.
    `timeout` bounds each connect, write and read, as the blocking shell's socket
    timeout does. After `Disconnected` the connection is done: reconnecting (and any
    backoff) is the caller's business, with a new AsyncClient.
    """

    def __init__(
        self,
        bench_dir: str | None = None,
        *,
        codec: Codec = JSON,
        timeout: float | None = None,
        max_line: int = ANSWER_BYTES,
    ):
        self.bench_dir = resolve_dir(bench_dir)
        self.path = socket_path(self.bench_dir)
        self.timeout = timeout
        self._proto = ClientProtocol(codec, max_line)
        self._sock: socket.socket | None = None
        self._turn = asyncio.Lock()

    async def connect(self) -> AsyncClient:
        """Open the connection (Disconnected `no-daemon` if nothing answers); self."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            try:
                await self._timed(loop.sock_connect(sock, self.path))
            except OSError as err:
                raise unreachable(self.bench_dir, self.path, err) from err
            check_peer(sock, self.path)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # ------------------------------------------------------------ requests

    @overload
    async def call(self, req: Request[R]) -> R: ...
    @overload
    async def call(self, req: dict[str, Any]) -> dict[str, Any]: ...
    async def call(self, req: Any) -> Any:
        """Send one request; its answer, or its refusal raised as WireError."""
        async with self._turn:
            rid = await self._send(req, stream=False)
            try:
                while True:
                    answer = await self._next()
                    if answer.belongs(rid):
                        return answer.result()
            finally:
                self._proto.forget(rid)

    @overload
    def stream(self, req: Request[R]) -> AsyncIterator[R]: ...
    @overload
    def stream(self, req: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...
    async def stream(self, req: Any) -> AsyncIterator[Any]:
        """Every frame of a stream up to its end frame (which is not yielded); a refusal
        raised as WireError. Left early, the connection is closed: the daemon would
        go on streaming into it."""
        async with self._turn:
            rid = await self._send(req, stream=True)
            finished = False
            try:
                while True:
                    answer = await self._next()
                    if not answer.belongs(rid):
                        continue
                    frame = answer.result()
                    if answer.done:
                        finished = True
                        return
                    yield frame
            finally:
                if not finished:
                    self.close()

    # ------------------------------------------------------------ bytes

    def _connected(self) -> socket.socket:
        if self._sock is None:
            raise Disconnected("no-daemon", f"not connected to the daemon at {self.path}")
        return self._sock

    async def _timed(self, aw: Awaitable[T]) -> T:
        if self.timeout is None:
            return await aw
        try:
            async with asyncio.timeout(self.timeout):
                return await aw
        except TimeoutError:
            raise TimeoutError("timed out") from None  # the words of a socket timeout

    async def _send(self, req: Any, stream: bool) -> Id:
        sock = self._connected()
        rid, line = self._proto.send(req, stream=stream)
        try:
            await self._timed(asyncio.get_running_loop().sock_sendall(sock, line))
        except OSError as err:
            self._proto.forget(rid)
            last = await self._last_words()
            if last is not None and last.error is not None:
                raise last.error from None
            raise broke(err) from None
        return rid

    async def _last_words(self) -> Answer | None:
        try:
            async with asyncio.timeout(LAST_WORDS_S):
                return await self._next()
        except (WireError, OSError):  # TimeoutError is an OSError
            return None

    async def _next(self) -> Answer:
        loop = asyncio.get_running_loop()
        sock = self._connected()
        while (answer := self._proto.next_answer()) is None:
            try:
                data = await self._timed(loop.sock_recv(sock, RECV_BYTES))
            except OSError as err:
                raise broke(err) from None
            self._proto.receive_data(data)
        return answer


def ended_under(err: WireError) -> bool:
    """Whether `err` says the connection ended under a call rather than the request was
    refused: the daemon closed it as idle (its id-less `idle-timeout`, said before the
    request reached it), or it closed or broke without an answer."""
    return err.code == "idle-timeout" or (isinstance(err, Disconnected) and err.code == "protocol")


class KeptClient(_Scoped):
    """A connection kept for a client's whole life: `await KeptClient(dir).connect()`,
    then `call` as on an AsyncClient.

    Such a connection may stay quiet for hours, and the daemon closes one that waited
    `--idle-timeout` seconds for a request; that is no failure of the daemon. So a call
    that finds its connection ended (`ended_under`) opens a new one and sends the
    request again, at most ATTEMPTS times. That is right only for requests that are
    safe to repeat (reads, and writes the daemon takes once whatever the tries, such as
    the bridge's marks and deliveries by key): one sent when the connection broke may
    have been carried out. Refusals are raised as they come. Only when no new
    connection opens is the daemon gone: Disconnected `no-daemon`, as from `connect`.
    """

    def __init__(
        self,
        bench_dir: str | None = None,
        *,
        attempts: int = ATTEMPTS,
        **options: Unpack[Options],
    ):
        self.bench_dir = resolve_dir(bench_dir)
        self.options = options  # each connection's: codec, timeout, max_line
        self.attempts = attempts
        self.reconnects = 0  # how often an ended connection was replaced
        self._opened = False
        self._conn: AsyncClient | None = None
        self._turn = asyncio.Lock()

    async def connect(self) -> KeptClient:
        """Open the first connection (Disconnected `no-daemon` if nothing answers); self."""
        async with self._turn:
            await self._open()
        return self

    async def _open(self) -> AsyncClient:
        client = AsyncClient(self.bench_dir, **self.options)
        self._conn = await client.connect()
        if self._opened:
            self.reconnects += 1
        self._opened = True
        return self._conn

    @overload
    async def call(self, req: Request[R]) -> R: ...
    @overload
    async def call(self, req: dict[str, Any]) -> dict[str, Any]: ...
    async def call(self, req: Any) -> Any:
        """Send one request; its answer, or its refusal raised as WireError."""
        async with self._turn:
            why: WireError | None = None
            for _ in range(self.attempts):
                conn = self._conn
                if conn is None:
                    conn = await self._open()
                try:
                    return await conn.call(req)
                except WireError as err:
                    if not ended_under(err):
                        raise
                    why = err
                    self.close()
            assert why is not None
            raise Disconnected(
                "no-daemon",
                f"the connection to the daemon ended under a call {self.attempts} times "
                f"in a row ({why.message})",
            )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
