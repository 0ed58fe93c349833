"""The bridge's client of its local daemon: bench_wire requests over the Unix socket."""

import asyncio

import msgspec

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.paths import socket_path

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(m.AnyResponse)
LINE_LIMIT = 64 * 1024 * 1024


class Local:
    """One connection to the daemon; requests on it are answered in order."""

    def __init__(self, bench_dir: str):
        self.path = socket_path(bench_dir)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()
        self.next_id = 0

    async def open(self) -> "Local":
        try:
            self.reader, self.writer = await asyncio.open_unix_connection(
                self.path, limit=LINE_LIMIT
            )
        except OSError as err:
            raise WireError("no-daemon", f"no daemon answers on {self.path} ({err})") from None
        return self

    async def call(self, req: m.Request):
        if self.reader is None or self.writer is None:
            raise WireError("no-daemon", f"not connected to the daemon at {self.path}")
        async with self.lock:
            self.next_id += 1
            req.id = self.next_id
            try:
                self.writer.write(_enc.encode(req) + b"\n")
                await self.writer.drain()
                line = await self.reader.readline()
            except (OSError, asyncio.IncompleteReadError) as err:
                raise WireError("no-daemon", f"the daemon connection broke ({err})") from None
            if not line:
                raise WireError("no-daemon", "the daemon closed the connection")
            try:
                a = _dec.decode(line)
            except msgspec.DecodeError as err:
                raise WireError("protocol", f"the daemon's answer did not decode: {err}") from None
            if isinstance(a, m.ErrorResponse):
                raise WireError(a.error.code, a.error.message)
            return a

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
