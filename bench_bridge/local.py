"""The bridge's client of its local daemon: bench_wire requests over the Unix socket.

The bridge keeps its connections for its whole life, and some stay quiet for hours
(no inbound mail, nothing to mark). The daemon closes a connection that waited
`--idle-timeout` seconds for a request; that is not a failure of the daemon, so a call
that finds its connection closed opens a new one and sends the request again. Every
bridge verb is safe to repeat (a pull reads, a mark or a delivery of the same message
is a no-op the second time), so a retry never writes anything twice. Only when a new
connection cannot be opened is the daemon gone (`no-daemon`).
"""

import asyncio

import msgspec

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.paths import socket_path

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(m.AnyResponse)
LINE_LIMIT = 64 * 1024 * 1024
ATTEMPTS = 3  # a call on a closed connection: reconnect and resend, at most this often


class Broken(Exception):
    """The connection ended under a call (closed as idle, or broken)."""


class Local:
    """One connection to the daemon; requests on it are answered in order."""

    def __init__(self, bench_dir: str):
        self.path = socket_path(bench_dir)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()
        self.next_id = 0
        self.reconnects = 0  # how often a closed connection was replaced (for the tests' logs)

    async def open(self) -> "Local":
        try:
            self.reader, self.writer = await asyncio.open_unix_connection(
                self.path, limit=LINE_LIMIT
            )
        except OSError as err:
            raise WireError("no-daemon", f"no daemon answers on {self.path} ({err})") from None
        return self

    async def call(self, req: m.Request):
        async with self.lock:
            for attempt in range(ATTEMPTS):
                if self.reader is None or self.writer is None or self._closed():
                    await self._reopen()
                try:
                    return await self._once(req)
                except Broken as why:
                    if attempt == ATTEMPTS - 1:
                        raise WireError(
                            "no-daemon", f"the daemon connection broke ({why})"
                        ) from None
                    self._drop()
        raise AssertionError("unreachable")  # the loop returns or raises

    def _closed(self) -> bool:
        """The daemon already closed this connection and we have read to its end."""
        assert self.reader is not None
        return self.reader.at_eof()

    async def _reopen(self) -> None:
        self._drop()
        await self.open()
        self.reconnects += 1

    def _drop(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def _once(self, req: m.Request):
        assert self.reader is not None and self.writer is not None
        self.next_id += 1
        req.id = self.next_id
        try:
            self.writer.write(_enc.encode(req) + b"\n")
            await self.writer.drain()
            line = await self.reader.readline()
        except (OSError, asyncio.IncompleteReadError) as err:
            raise Broken(str(err) or type(err).__name__) from None
        if not line:
            raise Broken("the daemon closed the connection")
        try:
            a = _dec.decode(line)
        except msgspec.DecodeError as err:
            raise WireError("protocol", f"the daemon's answer did not decode: {err}") from None
        if isinstance(a, m.ErrorResponse):
            if a.error.code == "idle-timeout" and a.id != req.id:
                raise Broken("closed as idle")  # said before our request reached it
            raise WireError(a.error.code, a.error.message)
        return a

    def close(self) -> None:
        self._drop()
