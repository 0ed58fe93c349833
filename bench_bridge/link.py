"""The bridge's NATS connection as the daemon sees it, and the streams it trusts.

A lost connection is said at once (one line, and through the daemon the event
bridge/disconnected, a line in benchd.log and `bench status`), whether or not anything
is queued: nats-py reconnects on its own and would otherwise say nothing. Its return
is said too (bridge/reconnected, with how long it was down).

The stream's and the bucket's configuration (bench_bridge.streams) is checked when the
bridge connects, after every reconnect (the server may be another, or its streams
remade) and every CHECK_EVERY_S; a difference stops the bridge (stream-misconfigured).
"""

import time
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from bench_bridge import streams, urls
from bench_bridge.local import say
from bench_bridge.options import Options
from bench_wire import messages as m

# Tell the daemon a report now (a no-op before the bridge has its connection).
Tell = Callable[[m.BridgeReport], Awaitable[None]]


class Link:
    def __init__(self, opts: Options, tell: Tell):
        self.o, self.tell = opts, tell
        self.checked = 0.0  # when the configuration was last found right (monotonic)
        self.recheck = False  # set on a reconnect
        self.down_at: float | None = None  # when the connection was lost (monotonic)
        self.closing = False  # our own close: not an outage

    async def check_streams(self, js: JetStreamContext) -> None:
        """Raise stream-misconfigured or stream-missing (bench_bridge.streams). On a
        server where this user may (no per-node permissions), a missing stream is made
        with the documented configuration."""
        o = self.o
        await streams.check(
            js, o.max_age, o.limits.forget_s, streams.Quotas(forget_after=o.limits.forget_s)
        )
        self.checked = time.monotonic()
        self.recheck = False

    def check_due(self) -> bool:
        return self.recheck or time.monotonic() - self.checked > streams.CHECK_EVERY_S

    def connected(self) -> None:
        """A new connection is up: the next loss is news."""
        self.down_at = None

    async def close(self, nc: NatsClient) -> None:
        self.closing = True
        try:
            await nc.close()
        finally:
            self.closing = False

    async def disconnected(self) -> None:
        if self.closing or self.down_at is not None:
            return
        self.down_at = time.monotonic()
        say(f"lost the connection to NATS ({urls.shown(self.o.conn.url)}); reconnecting")
        await self._report("disconnected")

    async def reconnected(self) -> None:
        down = time.monotonic() - self.down_at if self.down_at is not None else 0.0
        self.down_at = None
        self.recheck = True
        say(f"reconnected to NATS after {down:.1f}s")
        await self._report("reconnected", down)

    async def _report(self, change: str, down_s: float = 0.0) -> None:
        """Tell the daemon now, not at the next heartbeat."""
        await self.tell(
            m.BridgeReport(
                connected=change == "reconnected",
                stale_after=3 * self.o.heartbeat,
                link=change,
                down_s=round(down_s, 3),
            )
        )
