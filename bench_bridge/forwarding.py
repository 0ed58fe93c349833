"""The sending bridge's publishing window (docs/nodes.md, "How a message travels", 2)."""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

from nats.js import api

from bench_bridge.local import say
from bench_wire import messages as m
from bench_wire.asyncclient import KeptClient

# Publish one message without waiting for its PubAck: the future is the PubAck.
Publish = Callable[[m.RemoteMail], Awaitable["asyncio.Future[api.PubAck]"]]

PULL_MOST = 256  # messages per bridge/pull (the daemon's PULL_MAX)
PUBACK_WAIT_S = 5.0  # a PubAck not back within this long: the spell fails, republish


class Forwarding:
    """One spell of publishing, until a publish fails: `pull` publishes the queue after the
    cursor in order (on one connection, so the stream stores them in that order);
    `settle` takes the PubAcks in the same order and has those messages marked
    forwarded. The next spell starts from the last acknowledged message."""

    def __init__(
        self,
        publish: Publish,
        window: int,
        local: KeptClient,
        marks: "asyncio.Queue[list[str]]",
        cursor: str | None,
    ) -> None:
        self.publish, self.size = publish, window  # --publish-window
        self.local, self.marks = local, marks
        self.cursor: str | None = cursor  # acknowledged up to here
        self.pulled: str | None = cursor  # published up to here
        self.window: deque[tuple[str, float, asyncio.Future[api.PubAck]]] = deque()
        self.room = asyncio.Event()  # set when the window has room
        self.more = asyncio.Event()  # set when something was published
        self.room.set()
        self.settled = 0  # PubAcks taken this spell
        self.dups = 0
        self.full = False  # said once per spell of a full window

    async def pull(self) -> None:
        size = self.size
        while True:
            if len(self.window) >= size:
                if not self.full:
                    self.full = True
                    say(
                        f"{len(self.window)} messages await their PubAck (--publish-window): "
                        "publishing waits for NATS [publish-window-full]"
                    )
                self.room.clear()
                await self.room.wait()
                continue
            batch = (
                await self.local.call(
                    m.BridgePull(
                        limit=min(PULL_MOST, size - len(self.window)), wait=5.0, after=self.pulled
                    )
                )
            ).messages
            for x in batch:
                fut = await self.publish(x)
                self.window.append((x.mail_id, time.monotonic(), fut))
            if batch:
                self.pulled = batch[-1].mail_id
                self.more.set()

    async def settle(self) -> None:
        while True:
            if not self.window:
                self.more.clear()
                await self.more.wait()
                continue
            mail_id, sent, fut = self.window[0]
            left = sent + PUBACK_WAIT_S - time.monotonic()
            if not fut.done():
                await asyncio.wait_for(asyncio.shield(fut), max(left, 0.0))
            ids: list[str] = []
            try:
                while self.window and self.window[0][2].done():
                    mail_id, _, fut = self.window[0]
                    ack = fut.result()  # raises the publish's error
                    self.window.popleft()
                    self.dups += bool(ack.duplicate)
                    ids.append(mail_id)
                    self.cursor = mail_id
            finally:
                if ids:  # what JetStream acknowledged is marked, even when a later one failed
                    self.settled += len(ids)
                    self.marks.put_nowait(ids)
            if self.dups:
                say(
                    f"{self.dups} were already in the stream (republished after a restart "
                    "or a lost PubAck; JetStream kept one copy)"
                )
                self.dups = 0
            self.full = False
            self.room.set()

    def abandon(self) -> None:
        """The spell failed: its PubAcks still awaited are given up (republished next)."""
        for _, _, fut in self.window:
            fut.cancel()
        self.window.clear()
