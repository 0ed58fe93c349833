"""Bounded broadcast: one producer hands each item to every subscriber, never waiting.

Used for the hub's event followers (`bench events -f`, the dashboard) and a terminal's
output followers (`bench tail -f`, `bench attach`). Each subscriber has a queue of its
own size; one whose queue is full is dropped there and then (its stream ends, and
`overflowed` says why) instead of letting its backlog grow without bound or slowing
the producer and everyone else.
"""

from collections.abc import Callable
from typing import Generic, TypeVar

import trio

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
        """Leave the broadcast; the reader's stream ends after what is queued."""
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
