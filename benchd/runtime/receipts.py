"""Receipts for mail from other nodes: what became of it here, said back to its node.

A hub listener (like benchd.runtime.tracking). When a message from another node is
delivered here (bridge/delivered, which names its origin node and its id there), a
`delivered` receipt is queued for that node; when the copy is retired here (mail/read,
or agent/woken: a wake retires the mail it names), a `read` receipt with `by` read or
wake. The bridge takes them with bridge/receipts-pull and publishes them to the origin
node, whose daemon records them (handlers/bridge.receipts).

Best-effort by design: the queue lives in memory, bounded (QUEUE_MAX, the oldest
dropped first, said in benchd.log), so a receipt lost to a restart of this daemon or
its bridge leaves the sender seeing the message `queued`, never a wrong state. A read
after a restart is still answered: the copy's `origin` is read back from its file.
"""

from collections import OrderedDict, deque

import trio

from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.errors import WireError
from benchd.core.clock import SYSTEM_WALL, WallClock
from benchd.core.names import format_ms
from benchd.runtime.logs import Log
from benchd.store import mailfile
from benchd.store.index import Index

QUEUE_MAX = 8192  # receipts waiting for the bridge
KNOWN_MAX = 65536  # delivered copies remembered (local id -> origin node, origin id)


class Receipts:
    def __init__(self, index: Index, node: str, log: Log, wall: WallClock = SYSTEM_WALL) -> None:
        self.index = index
        self.node = node
        self.log = log
        self.queue: deque[m.Receipt] = deque()
        self.known: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._more = trio.Event()
        self.dropped = 0
        # Ids sort by time: a copy delivered since this start is in `known` (unless
        # evicted), so only older ids are looked up in their file (a read of local
        # mail costs nothing more). A wall clock stepped back costs a lookup at most.
        self.since = format_ms(wall.wall_ms()).replace("-", "").replace(":", "")
        self.evicted = False

    def on_event(self, ev: m.Event) -> None:
        match ev:
            case m.BridgeDelivered(origin_id=str(origin_id)) if origin_id:
                self.known[ev.mail_id] = (ev.origin, origin_id)
                while len(self.known) > KNOWN_MAX:
                    self.known.popitem(last=False)
                    self.evicted = True
                self._put(m.Receipt(mail_id=origin_id, state="delivered", at=ev.ts, node=ev.origin))
            case m.MailReadEvent():
                self._read(ev.mail_id, ev.ts, "read", ev.path)
            case m.AgentWoken(mail_id=str(mail_id)):
                self._read(mail_id, ev.ts, "wake", ev.path)

    def _read(self, mail_id: str, ts: int, by: str, path: str | None) -> None:
        where = self.known.pop(mail_id, None)
        if where is None and (self.evicted or mail_id < self.since):
            where = self._origin(mail_id, path)
        if where is not None:
            self._put(m.Receipt(mail_id=where[1], state="read", at=ts, by=by, node=where[0]))

    def _origin(self, mail_id: str, path: str | None) -> tuple[str, str] | None:
        """A copy delivered before this daemon started: its origin, from its file (only
        for mail whose sender is on another node, by its state row)."""
        row = self.index.get_state(mail_id)
        if row is None or row.sender is None or "@" not in row.sender or not path:
            return None
        try:
            data = mailfile.load(path)
            if data is None and "/inbox/" in path:  # retired since the event was logged
                path = path.replace("/inbox/", "/read/")
                data = mailfile.load(path)
            origin = None if data is None else mailfile.read(path, data)[0].origin
        except (ValueError, WireError):
            return None
        if not origin or "@" not in origin:
            return None
        origin_id, _, node = origin.rpartition("@")
        try:
            if split_address(row.sender)[1] != node:
                return None
        except WireError:
            return None
        return node, origin_id

    def _put(self, r: m.Receipt) -> None:
        if r.node == self.node or not r.node:
            return
        if len(self.queue) >= QUEUE_MAX:
            self.queue.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                self.log.warning(
                    "receipts dropped: the bridge is not taking them", dropped=self.dropped
                )
        self.queue.append(r)
        self._more.set()

    async def pull(self, limit: int, wait: float) -> list[m.Receipt]:
        """Up to `limit` receipts, oldest first (waits up to `wait` s for one); what is
        returned is no longer held here."""
        if not self.queue and wait > 0:
            self._more = trio.Event()
            with trio.move_on_after(wait):
                await self._more.wait()
        out: list[m.Receipt] = []
        while self.queue and len(out) < limit:
            out.append(self.queue.popleft())
        return out
