"""The dashboard's line to the daemon: the asyncio client (`bench_wire.asyncclient`).

One short connection per request; one long connection per stream (the event log, a
session's screen). A session's token is never sent: the dashboard is the operator.
"""

import os
from collections.abc import AsyncIterator
from typing import TypeVar

from bench_wire import messages as m
from bench_wire.asyncclient import AsyncClient
from bench_wire.client import resolve_dir
from bench_wire.errors import Disconnected
from bench_wire.messages import StructCodec

R = TypeVar("R", bound=m.Response)

# Between attempts to reach a daemon that is not running: doubling from the first to the
# last, so a dashboard left open on a stopped daemon wakes only every few seconds, while
# one that saw `bench down; bench up` is back within a second or two.
RETRY_FIRST_S = 0.25
RETRY_LAST_S = 4.0


def retry_delay(failures: int) -> float:
    """Seconds to wait after `failures` attempts in a row found no daemon (0: the first)."""
    return min(RETRY_LAST_S, RETRY_FIRST_S * 2.0 ** min(failures, 16))


class DaemonGone(Exception):
    """No daemon answers (not started, stopped, or the connection broke)."""


class Source:
    """The daemon of one BENCH_DIR, as the dashboard asks it: `bench_wire.messages`
    requests, each answer of its request's own type (`bench_wire.messages.StructCodec`)."""

    def __init__(self, bench_dir: str | None = None):
        self.dir = resolve_dir(bench_dir)

    def _client(self) -> AsyncClient:
        return AsyncClient(self.dir, codec=StructCodec())

    async def call(self, req: m.Request[R]) -> R:
        """One request, its answer; WireError for a refusal, DaemonGone if none answers."""
        try:
            async with self._client() as conn:
                return await conn.call(req)
        except Disconnected as err:
            raise DaemonGone(err.message) from None

    async def stream(self, req: m.Request[R]) -> AsyncIterator[R]:
        """Every frame of a stream until its end frame (DaemonGone if it breaks)."""
        try:
            async with self._client() as conn:
                async for frame in conn.stream(req):
                    yield frame
        except Disconnected as err:
            raise DaemonGone(err.message) from None

    def attach_argv(self, handle: str) -> list[str]:
        """`bench attach H` for this BENCH_DIR, by the installed console script."""
        import sys

        bench = os.path.join(os.path.dirname(sys.executable), "bench")
        if not os.path.exists(bench):
            return [sys.executable, "-m", "bench_cli.entry", "attach", "--dir", self.dir, handle]
        return [bench, "attach", "--dir", self.dir, handle]
