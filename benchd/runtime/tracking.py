"""What became of mail: delivery states kept from committed events (`MailStates`), and
receipts said back to the node a message came from (`Receipts`; docs/nodes.md,
"Receipts").

Both are hub listeners, called right after the committer applied the batch to the
index with no await between, so a state row and the `last_seq` it covers commit
together; a start replays what the log holds past that seq. Receipts wait in memory,
bounded (QUEUE_MAX, oldest dropped, said in benchd.log): one lost to a restart leaves
the sender seeing `queued`, never a wrong state.
"""

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.errors import WireError
from benchd.core import delivery
from benchd.core.names import SYSTEM_WALL, WallClock, format_ms
from benchd.runtime.system import Log
from benchd.store import mailfile, mailstates
from benchd.store.index import Index
from benchd.store.mailstates import Columns, StateRow

# The kinds that set states (a replay decodes only these).
_SETTERS: tuple[type[m.Event], ...] = (m.MailSent, m.AgentWoken, m.WakeCapped, m.WakeDeferred)
_SETTERS += (m.MailReadEvent, m.AgentActive, m.BridgeQueued, m.BridgeDelivered, m.BridgeReceipt)
KINDS = frozenset(t.__struct_config__.tag for t in _SETTERS)


class MailStates:
    def __init__(self, index: Index, node: str = "") -> None:
        self.index = index
        self.own = "@" + node  # this node's suffix: `bob@<own>` is kept as `bob`

    # ------------------------------------------------------------ from events

    def on_event(self, ev: m.Event) -> None:
        put = self.index.put_state
        match ev:
            case m.MailSent():
                cols: Columns = {"sender": ev.sender, "rcpt": ev.to, "delivered": ev.ts}
                if not ev.live and not ev.recovered:
                    cols["nw_reason"], cols["nw_at"] = "no-live-session", ev.ts
                put(ev.mail_id, cols)
            case m.BridgeQueued():
                # The queue's copy names its sender with this node (`alice@node1`): the
                # row keeps the local handle, as the sender asks for its mail by it.
                sender = ev.sender.removesuffix(self.own)
                put(ev.mail_id, {"sender": sender, "rcpt": ev.to, "queued": ev.ts})
            case m.AgentWoken(mail_id=str(mail_id)):
                row = self.index.get_state(mail_id)
                cols = {"woken": ev.ts}
                if row is None or row.read_at is None:
                    cols["read_at"], cols["read_by"] = ev.ts, "wake"
                put(mail_id, cols)
            case m.WakeCapped():
                put(ev.mail_id, {"nw_reason": "capped", "nw_at": ev.ts, "nw_until": ev.until})
            case m.WakeDeferred(mail_id=str(mail_id)):
                row = self.index.get_state(mail_id)
                if row is None or (row.woken is None and row.nw_reason is None):
                    # parked: until the agent's reset time, when it said one
                    put(mail_id, {"nw_reason": ev.reason, "nw_at": ev.ts, "nw_until": ev.until})
            case m.MailReadEvent():
                row = self.index.get_state(ev.mail_id)
                if row is None or row.read_at is None:
                    put(ev.mail_id, {"read_at": ev.ts, "read_by": "read", "reader": ev.reader})
            case m.BridgeReceipt():
                # What the node it was sent to said (checked by handlers/bridge.receipts:
                # only that node speaks of it). The first of each is kept.
                row = self.index.get_state(ev.mail_id)
                if ev.state == "delivered" and (row is None or row.delivered is None):
                    put(ev.mail_id, {"delivered": ev.at, "node": ev.node})
                elif ev.state == "read" and (row is None or row.read_at is None):
                    cols = {"read_at": ev.at, "read_by": ev.by or "read", "node": ev.node}
                    if ev.by == "wake" and (row is None or row.woken is None):
                        cols["woken"] = ev.at  # the wake line was typed there
                    put(ev.mail_id, cols)
            case m.AgentActive(mail_id=str(mail_id)):
                row = self.index.get_state(mail_id)
                if row is None or row.active is None:
                    put(mail_id, {"active": ev.ts})

    def replay(self, records: Iterable[dict[str, Any]]) -> int:
        """Apply logged events (records of events.jsonl) the index has not: at start."""
        n = 0
        for rec in records:
            if rec.get("kind") not in KINDS:
                continue
            try:
                ev = msgspec.convert(rec, m.AnyEvent)
            except msgspec.ValidationError:
                continue  # a line of another version: it only cost its state
            self.on_event(ev)
            n += 1
        return n

    # ------------------------------------------------------------ reads

    def _committed(self) -> None:
        idx = self.index
        if idx.pending.states and idx.due(0):
            idx.flush()  # a failure keeps them pending: get() merges them

    def get(self, mail_id: str) -> StateRow | None:
        self._committed()
        return self.index.get_state(mail_id)

    def marks(self, row: StateRow) -> list[delivery.Mark]:
        reply = self.index.read(lambda w: mailstates.replies(w, [row.id])).get(row.id)
        return delivery.marks(row, reply)

    def sent(
        self, sender: str | None, to: str | None, state: str | None, limit: int
    ) -> tuple[list[tuple[StateRow, delivery.Mark]], bool]:
        """Sent mail newest first, each with the state a listing shows; True if more.
        With `state`, the newest max(4 x limit, 200) rows are read for `limit` matches."""
        self._committed()
        out: list[tuple[StateRow, delivery.Mark]] = []
        cap = max(limit * 4, 200) if state else limit + 1
        rows = self.index.read(lambda w: mailstates.by_sender(w, sender, to, cap))
        rows = self._with_pending(rows, sender, to)
        replies = self.index.read(lambda w: mailstates.replies(w, [r.id for r in rows]))
        for row in rows:
            mark = delivery.current(delivery.marks(row, replies.get(row.id)))
            if mark is None or (state is not None and mark.state != state):
                continue
            out.append((row, mark))
        return out[:limit], len(out) > limit or (state is not None and len(rows) >= cap)

    def _with_pending(
        self, rows: list[StateRow], sender: str | None, to: str | None
    ) -> list[StateRow]:
        """Rows merged with changes not committed yet (only while the index cannot commit)."""
        pending = self.index.pending.states
        if not pending:
            return rows
        byid = {r.id: r for r in rows}
        for mail_id in pending:
            row = self.index.get_state(mail_id)
            if row is None or (sender is not None and row.sender != sender):
                continue
            if to is not None and row.rcpt != to:
                continue
            byid[mail_id] = row
        return sorted(byid.values(), key=lambda r: r.id, reverse=True)


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
