"""What this node takes from the others, all of it untrusted input (docs/nodes.md, "The
directory" and the `bench bridge` options): the directory's entries, and what the
receiving bridge refuses before its daemon sees it, each budget per origin node. Pure.
"""

import time
from collections import OrderedDict
from dataclasses import dataclass

import msgspec

from bench_bridge.options import (
    ENTRY_MAX,
    FORGET_S,
    HANDLES_MAX,
    NEW_MAILBOXES_PER_HOUR,
    NODES_MAX,
    RECEIPTS_PER_MINUTE,
    REPLY_TO_MAX,
    Options,
)
from bench_wire import messages as m
from bench_wire.addresses import is_handle, split_address
from bench_wire.errors import WireError

# ---------------------------------------------------------------- the directory


class Entry(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """One node's entry, as its bridge puts it under its own name as the key
    (`$KV.BENCH_NODES.<name>`, the subject a node's NATS user is allowed to write)."""

    node: str
    seen_ms: int
    handles: list[str] = []
    instance: str = ""


_dec = msgspec.json.Decoder(Entry)
_enc = msgspec.json.Encoder()


@dataclass
class Limits:
    entry_max: int = ENTRY_MAX
    handles_max: int = HANDLES_MAX
    nodes_max: int = NODES_MAX
    forget_s: float = FORGET_S

    @classmethod
    def of(cls, o: Options) -> "Limits":
        """The directory's caps among the bridge's options."""
        return cls(o.entry_max, o.handles_max, o.nodes_max, o.forget_after)


def encode_entry(node: str, seen_ms: int, handles: list[str], instance: str) -> bytes:
    return _enc.encode(Entry(node=node, seen_ms=seen_ms, handles=handles, instance=instance))


def decode_entry(key: str, raw: bytes, now_ms: int, limits: Limits) -> Entry:
    """The entry under `key`, checked and with `seen` clamped to now; raises WireError
    (the entry is skipped)."""
    if len(raw) > limits.entry_max:
        raise WireError(
            "entry-too-large",
            f"the entry {key!r} is {len(raw)} bytes, more than the cap of {limits.entry_max}",
        )
    try:
        e = _dec.decode(raw)
    except msgspec.DecodeError as err:
        raise WireError("bad-entry", f"the entry {key!r} is not a node entry: {err}") from None
    if not is_handle(e.node) or e.node != key:
        raise WireError("bad-entry", f"the entry {key!r} names node {e.node!r}, not its own key")
    if len(e.handles) > limits.handles_max:
        raise WireError(
            "too-many-handles",
            f"the entry {key!r} lists {len(e.handles)} handles, more than the cap of "
            f"{limits.handles_max}",
        )
    bad = next((h for h in e.handles if not is_handle(h)), None)
    if bad is not None:
        raise WireError("bad-entry", f"the entry {key!r} lists {bad!r}, which is not a handle")
    e.seen_ms = min(e.seen_ms, now_ms)
    return e


def listing(
    entries: list[Entry], own: str, now_ms: int, limits: Limits
) -> tuple[list[m.NodeInfo], int]:
    """The other nodes to report: seen within `forget_s`, at most `nodes_max` of them
    (the most recently seen); and how many were left out for the cap."""
    cutoff = now_ms - limits.forget_s * 1000
    alive = [e for e in entries if e.node != own and e.seen_ms >= cutoff]
    alive.sort(key=lambda e: -e.seen_ms)
    kept = [
        m.NodeInfo(node=e.node, seen_ms=e.seen_ms, handles=e.handles)
        for e in alive[: limits.nodes_max]
    ]
    return kept, len(alive) - len(kept)


def taken_by(entry: Entry | None, instance: str, now_ms: int, fresh_ms: float) -> str | None:
    """The other instance heartbeating under our name, or None. An entry by another
    instance that has gone quiet (older than `fresh_ms`) is a predecessor, not a rival."""
    if entry is None or not entry.instance or entry.instance == instance:
        return None
    return entry.instance if now_ms - entry.seen_ms <= fresh_ms else None


# ---------------------------------------------------------------- admission

OPERATOR = "operator"
RECEIPTS_MAX = 256  # receipts in one NATS message
KNOWN_MAX = 65536  # handles remembered as delivered to
ORIGINS_MAX = 4096  # origin nodes with a bucket (the directory holds at most --nodes-max)


class Admission:
    def __init__(
        self,
        reply_to_max: int = REPLY_TO_MAX,
        new_mailboxes_per_hour: int = NEW_MAILBOXES_PER_HOUR,
        receipts_per_minute: int = RECEIPTS_PER_MINUTE,
    ):
        self.reply_to_max = reply_to_max
        self.rate = new_mailboxes_per_hour
        self.known: OrderedDict[str, None] = OrderedDict()
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self.receipt_rate = receipts_per_minute
        self.receipt_buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.receipts_told: dict[str, float] = {}

    def refusal(self, origin: str, mail: m.RemoteMail, live: list[str]) -> m.ErrorBody | None:
        """Why this message is refused, or None to hand it to the daemon. A message
        admitted to a new recipient takes one of its origin's tokens."""
        if len(mail.reply_to) > self.reply_to_max:
            return m.ErrorBody(
                "too-many-recipients",
                f"it lists {len(mail.reply_to)} reply-to addresses, more than the cap of "
                f"{self.reply_to_max} (--reply-to-max)",
            )
        handle = parts(mail.to)[0]
        if handle is None or handle == OPERATOR or handle in self.known or handle in live:
            return None  # the operator's mailbox is always there
        if not _take(self.buckets, origin, self.rate, 3600.0, 1):
            return m.ErrorBody(
                "new-mailbox-rate",
                f"node {origin} has made {self.rate} new mailboxes here in the last hour, "
                f"the most allowed (--new-mailboxes-per-hour); {handle} is not a handle here",
            )
        self._remember(handle)  # its mailbox is made by this delivery
        return None

    def receipts_refusal(self, origin: str, n: int) -> str | None:
        """Why a message of `n` receipts from `origin` is dropped, or None to take it
        (taking `n` of that origin's receipt tokens)."""
        if not 1 <= n <= RECEIPTS_MAX:
            return f"{n} receipts in one message (1-{RECEIPTS_MAX}) [bad-receipt]"
        if not _take(self.receipt_buckets, origin, self.receipt_rate, 60.0, n):
            return (
                f"node {origin} sent more than {self.receipt_rate} receipts in a minute "
                "(--receipts-per-minute) [receipt-rate]"
            )
        return None

    def receipts_said(self, origin: str) -> bool:
        """True at most once a minute per origin: whether to say a drop in bridge.out."""
        now = time.monotonic()
        if now - self.receipts_told.get(origin, -60.0) < 60.0:
            return False
        self.receipts_told[origin] = now
        if len(self.receipts_told) > ORIGINS_MAX:
            self.receipts_told.clear()
        return True

    def _remember(self, handle: str) -> None:
        self.known[handle] = None
        self.known.move_to_end(handle)
        while len(self.known) > KNOWN_MAX:
            self.known.popitem(last=False)


def _take(
    buckets: "OrderedDict[str, tuple[float, float]]", origin: str, rate: int, per_s: float, n: int
) -> bool:
    """Take `n` of `origin`'s tokens (a bucket of `rate`, refilled over `per_s` seconds);
    False, taking none, when it holds fewer. At most ORIGINS_MAX buckets are kept."""
    now = time.monotonic()
    tokens, at = buckets.get(origin, (float(rate), now))
    tokens = min(float(rate), tokens + (now - at) * rate / per_s)
    ok = tokens >= n
    buckets[origin] = (tokens - n if ok else tokens, now)
    buckets.move_to_end(origin)
    while len(buckets) > ORIGINS_MAX:
        buckets.popitem(last=False)
    return ok


def parts(address: str) -> tuple[str | None, str | None]:
    """An address's handle and node; (None, None) for a bad one (never a match)."""
    try:
        return split_address(address)
    except WireError:
        return None, None
