"""The hub: hands every committed event to in-process listeners and to live followers.

Listeners (the reactor) are plain callbacks run on the event loop right after the batch
is durable, given the event typed (`bench_wire.messages`). Followers (`bench events -f`)
get the log's records as they are (dicts: they go out on the wire unchanged), each
through a bounded queue (`broadcast`): a follower that does not keep up is dropped with
`slow-consumer` instead of letting its backlog grow without bound or slow anyone else.
"""

from collections.abc import Callable
from typing import Any

import trio

from bench_wire.messages import Event
from benchd.runtime.broadcast import Broadcast, Subscriber
from benchd.runtime.logs import Log

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
        """One committed batch, in log order: each event typed (for the listeners) and
        as its log record (for the followers), as the committer encoded it."""
        for record, event in zip(records, events, strict=True):
            for listener in self.listeners:
                try:
                    listener(event)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop the log
                    self._failed("event listener failed", record)
            self.followers.offer(record)

    def _failed(self, what: str, record: Record) -> None:
        if self.log is not None:
            self.log.exception(what, kind=record.get("kind"))

    def follow(self, kind: str | None) -> Subscriber[Record]:
        """A follower of every record (or of one kind or kind prefix), until it closes or
        falls behind."""
        if kind is None:
            return self.followers.subscribe(FOLLOWER_QUEUE)
        # A kind, or a prefix of kinds (`job/`): no kind is a prefix of another.
        return self.followers.subscribe(
            FOLLOWER_QUEUE, lambda r: str(r.get("kind")).startswith(kind)
        )
