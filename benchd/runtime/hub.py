"""The hub: hands every committed event to in-process listeners (typed) and to live
followers (the log's records), each through a bounded queue (`Broadcast`).
"""

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from bench_wire.messages import Event
from benchd.runtime.system import Log

# Bounded broadcast (the hub's followers, a terminal's): one producer hands each item
# to every subscriber, never waiting; one whose queue is full is dropped (`overflowed`).

T = TypeVar("T")


class Subscriber(Generic[T]):
    """One follower: read `receive` until it ends; `close()` when leaving."""

    def __init__(self, group: "Broadcast[T]", size: int, wants: Callable[[T], bool] | None):
        self._group = group
        self.send, self.receive = trio.open_memory_channel[T](size)
        self.wants = wants  # None: every item
        self.overflowed = False  # dropped for falling behind

    def offer(self, item: T) -> None:
        if self.wants is not None and not self.wants(item):
            return
        try:
            self.send.send_nowait(item)
        except trio.WouldBlock:
            self.overflowed = True
            self.close()
        except trio.ClosedResourceError:
            self.close()

    def close(self) -> None:
        """Leave; the reader's stream ends after what is queued."""
        self._group.subscribers.discard(self)
        self.send.close()


class Broadcast(Generic[T]):
    def __init__(self) -> None:
        self.subscribers: set[Subscriber[T]] = set()

    def subscribe(self, size: int, wants: Callable[[T], bool] | None = None) -> Subscriber[T]:
        s = Subscriber(self, size, wants)
        self.subscribers.add(s)
        return s

    def offer(self, item: T) -> None:
        for s in list(self.subscribers):
            s.offer(item)

    def close(self) -> None:
        """End every subscriber's stream (a stop, or the producer has gone)."""
        for s in list(self.subscribers):
            s.close()


FOLLOWER_QUEUE = 4096

Record = dict[str, Any]  # one event as the log holds it and the wire carries it
Listener = Callable[[Event], None]


class Hub:
    def __init__(self, log: Log | None = None) -> None:
        self.listeners: list[Listener] = []
        self.followers: Broadcast[Record] = Broadcast()
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

    def publish(self, records: list[Record], events: list[Event]) -> None:
        """One committed batch, in log order, as the committer encoded it."""
        for record, event in zip(records, events, strict=True):
            for listener in self.listeners:
                try:
                    listener(event)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop the log
                    if self.log is not None:
                        self.log.exception("event listener failed", kind=record.get("kind"))
            self.followers.offer(record)

    def follow(self, kind: str | None) -> Subscriber[Record]:
        """A follower of every record, or of a kind or a prefix of kinds (`job/`: no
        kind is a prefix of another)."""
        if kind is None:
            return self.followers.subscribe(FOLLOWER_QUEUE)
        return self.followers.subscribe(
            FOLLOWER_QUEUE, lambda r: str(r.get("kind")).startswith(kind)
        )
