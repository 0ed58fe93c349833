"""The hub: hands every committed event to in-process listeners and to live followers.

Listeners (the reactor) are plain callbacks run on the event loop right
after the batch is durable. Followers (`bench events -f`) get a bounded queue each; a
follower that does not keep up is dropped with `slow-consumer` instead of letting its
backlog grow without bound or slow anyone else.
"""

from collections.abc import Callable

import trio

FOLLOWER_QUEUE = 4096


class Follower:
    def __init__(self, hub: "Hub", kind: str | None):
        self.hub = hub
        self.kind = kind
        self.send, self.receive = trio.open_memory_channel[dict](FOLLOWER_QUEUE)
        self.overflowed = False

    def offer(self, record: dict) -> None:
        if self.overflowed:
            return
        if self.kind is not None and record.get("kind") != self.kind:
            return
        try:
            self.send.send_nowait(record)
        except trio.WouldBlock:
            self.overflowed = True
            self.send.close()

    def close(self) -> None:
        self.hub.followers.discard(self)
        self.send.close()


class Hub:
    def __init__(self, log=None) -> None:
        self.listeners: list[Callable[[dict], None]] = []
        self.followers: set[Follower] = set()
        self.streams = 0  # follow streams still sending (shutdown waits for their end frames)
        self._no_streams = trio.Event()
        self._no_streams.set()
        self.log = log

    def stream_started(self) -> None:
        if self.streams == 0:
            self._no_streams = trio.Event()
        self.streams += 1

    def stream_ended(self) -> None:
        self.streams -= 1
        if self.streams == 0:
            self._no_streams.set()

    async def streams_ended(self) -> None:
        """Return once every follow stream has sent its end (at a stop)."""
        await self._no_streams.wait()

    def publish(self, records: list[dict]) -> None:
        for record in records:
            for listener in self.listeners:
                try:
                    listener(record)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop the log
                    if self.log is not None:
                        self.log.exception("event listener failed", kind=record.get("kind"))
            for f in list(self.followers):
                f.offer(record)

    def follow(self, kind: str | None) -> Follower:
        f = Follower(self, kind)
        self.followers.add(f)
        return f
