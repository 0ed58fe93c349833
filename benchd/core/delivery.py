"""The delivery states of one sent message, from what was recorded of it (pure).

A message's row (`StateRow`, kept by benchd.store.mailstates) and the first reply the
thread links name become the states it reached, in order, and the one a listing shows:
replied > active > read (by a read) > woken > not-woken > delivered > queued. A wake
retires the mail it announces, so woken mail is also `read` by the wake; the listing
then says `woken` (or `active`), and `read` is kept for mail its recipient read itself.
"""

from dataclasses import dataclass, field

import msgspec

from benchd.core.names import id_ms


class StateRow(msgspec.Struct, array_like=True, gc=False):
    """A message's row: who sent it to whom, and when it reached each state (None: not)."""

    id: str
    sender: str | None = None
    rcpt: str | None = None
    sent: int | None = None
    queued: int | None = None
    delivered: int | None = None
    woken: int | None = None
    nw_reason: str | None = None
    nw_at: int | None = None
    nw_until: int | None = None
    active: int | None = None
    read_at: int | None = None
    read_by: str | None = None
    reader: str | None = None
    replied_at: int | None = None
    reply: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class Mark:
    """One state reached, at wall ms `at`, with what it says of itself."""

    state: str
    at: int
    extra: dict[str, str] = field(default_factory=dict)


def marks(f: StateRow, reply: str | None = None) -> list[Mark]:
    """The states reached, in order (a local reply's id as `reply`)."""
    out: list[Mark] = []
    if f.queued is not None:
        out.append(Mark("queued", f.queued))
    if f.delivered is not None:
        out.append(Mark("delivered", f.delivered, _node(f)))
    reason, at = f.nw_reason, f.nw_at
    if reason is None and f.woken is None and f.read_by == "read" and f.read_at is not None:
        reason, at = "read-first", f.read_at  # read before any wake could be typed
    if reason is not None and at is not None:
        extra = {"reason": reason}
        if reason in ("capped", "parked") and f.nw_until is not None:
            extra["until"] = str(f.nw_until)
        out.append(Mark("not-woken", at, extra))
    if f.woken is not None:
        out.append(Mark("woken", f.woken))
    if f.read_at is not None:
        extra = {"by": f.read_by or "read"}
        if f.reader:
            extra["reader"] = f.reader
        out.append(Mark("read", f.read_at, extra | _node(f)))
    if f.active is not None:
        out.append(Mark("active", f.active))
    if f.replied_at is not None and f.reply is not None:
        out.append(Mark("replied", f.replied_at, {"reply": f.reply} | _node(f)))
    elif reply is not None:
        at_ms = id_ms(reply)
        if at_ms is not None:
            out.append(Mark("replied", at_ms, {"reply": reply}))
    return out


def _node(f: StateRow) -> dict[str, str]:
    return {"node": f.node} if f.node else {}


def current(ms: list[Mark]) -> Mark | None:
    by = {m.state: m for m in ms}
    for state in ("replied", "active"):
        if state in by:
            return by[state]
    read = by.get("read")
    if read is not None and read.extra.get("by") == "read":
        return read
    for state in ("woken", "not-woken", "read", "delivered", "queued"):
        if state in by:
            return by[state]
    return None
