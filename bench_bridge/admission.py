"""What the receiving bridge refuses from another node before its daemon sees it: mail
with more reply-to addresses than `--reply-to-max`, and mail that would make more new
mailboxes here than `--new-mailboxes-per-hour` allows that origin node. A refusal is
returned to the sender as a bounce (`too-many-recipients`, as the daemon's own
`--reply-to-max` says it; `new-mailbox-rate`), which the daemon records as
bridge/bounced. Pure: no I/O.

A recipient counts as new when it is not a live handle here and this bridge has not
delivered to it before (it keeps the last KNOWN_MAX such handles). Each origin node has
its own budget, a token bucket refilled at the hourly rate with a burst of the same
size, so one node making up handles cannot fill this node's disk with mailboxes, and
cannot spend another node's budget.

Receipts (what became of this node's mail there) are bounded the same way, per origin
node: at most RECEIPTS_MAX in one message and `--receipts-per-minute` a minute; more
are dropped (a line in bridge.out), which leaves the state where it was.
"""

import time
from collections import OrderedDict

from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.errors import WireError

OPERATOR = "operator"
REPLY_TO_MAX = 16  # reply-to addresses in one message from another node
NEW_MAILBOXES_PER_HOUR = 120  # per origin node
RECEIPTS_PER_MINUTE = 6000  # receipts taken from one origin node per minute
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
        handle = _handle(mail.to)
        if handle is None or handle == OPERATOR or handle in self.known or handle in live:
            return None  # the operator's mailbox is always there
        tokens = self._tokens(origin)
        if tokens < 1.0:
            return m.ErrorBody(
                "new-mailbox-rate",
                f"node {origin} has made {self.rate} new mailboxes here in the last hour, "
                f"the most allowed (--new-mailboxes-per-hour); {handle} is not a handle here",
            )
        self.buckets[origin] = (tokens - 1.0, time.monotonic())
        self._remember(handle)  # its mailbox is made by this delivery
        return None

    def receipts_refusal(self, origin: str, n: int) -> str | None:
        """Why a message of `n` receipts from `origin` is dropped, or None to take it
        (taking `n` of that origin's receipt tokens). Receipts are best-effort: a dropped
        one leaves its message's state where it was, never a wrong one."""
        if not 1 <= n <= RECEIPTS_MAX:
            return f"{n} receipts in one message (1-{RECEIPTS_MAX}) [bad-receipt]"
        now = time.monotonic()
        rate = float(self.receipt_rate)
        tokens, at = self.receipt_buckets.get(origin, (rate, now))
        tokens = min(rate, tokens + (now - at) * rate / 60.0)
        self.receipt_buckets[origin] = (tokens, now)
        self.receipt_buckets.move_to_end(origin)
        while len(self.receipt_buckets) > ORIGINS_MAX:
            self.receipt_buckets.popitem(last=False)
        if tokens < n:
            return (
                f"node {origin} sent more than {self.receipt_rate} receipts in a minute "
                "(--receipts-per-minute) [receipt-rate]"
            )
        self.receipt_buckets[origin] = (tokens - n, now)
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

    def _tokens(self, origin: str) -> float:
        now = time.monotonic()
        tokens, at = self.buckets.get(origin, (float(self.rate), now))
        self.buckets[origin] = (tokens, at)
        self.buckets.move_to_end(origin)
        while len(self.buckets) > ORIGINS_MAX:
            self.buckets.popitem(last=False)
        return min(float(self.rate), tokens + (now - at) * self.rate / 3600.0)


def _handle(address: str) -> str | None:
    try:
        return split_address(address)[0]
    except WireError:
        return None
