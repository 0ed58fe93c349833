"""The asyncio shell of the client protocol (ARCHITECTURE.md, "One typed client"): the
dashboard, MCP and the bridge. It connects and checks the peer as the blocking shell does.
"""

from __future__ import annotations

import asyncio
import socket
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

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

    Requests take turns (the daemon answers a connection's one at a time anyway); the late
    answer to a cancelled call is dropped, never handed to the next caller. `timeout`
    bounds each connect, write and read. After `Disconnected` the connection is done.
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
        """Every frame of a stream up to its end frame; a refusal raised as WireError.
        Left early, the connection is closed: the daemon would go on streaming into it."""
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
    """Whether the connection ended under a call (closed as idle before the request
    reached the daemon, or closed or broken without an answer) rather than a refusal."""
    return err.code == "idle-timeout" or (isinstance(err, Disconnected) and err.code == "protocol")


class KeptClient(_Scoped):
    """A connection kept for a client's whole life: `await KeptClient(dir).connect()`,
    then `call` as on an AsyncClient.

    The daemon closes a connection idle for `--idle-timeout`, so a call that finds its
    connection ended (`ended_under`) sends the request again on a new one, at most
    ATTEMPTS times: only for requests that are safe to repeat (reads, and writes the
    daemon takes once, such as the bridge's by key), as one sent when the connection
    broke may have been carried out.
    """

    def __init__(
        self,
        bench_dir: str | None = None,
        *,
        codec: Codec = JSON,
        attempts: int = ATTEMPTS,
    ):
        self.bench_dir = resolve_dir(bench_dir)
        self.codec = codec
        self.attempts = attempts
        self._conn: AsyncClient | None = None
        self._turn = asyncio.Lock()

    async def connect(self) -> KeptClient:
        """Open the first connection (Disconnected `no-daemon` if nothing answers); self."""
        async with self._turn:
            await self._open()
        return self

    async def _open(self) -> AsyncClient:
        self._conn = await AsyncClient(self.bench_dir, codec=self.codec).connect()
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
