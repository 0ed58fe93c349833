"""Sender limits: what a flood meets and no real agent does (docs/limits.md). Pure. A
session and every job below it draw on the bucket of the tree's root (benchd.core.trees).
"""

import math
from collections.abc import Hashable
from dataclasses import dataclass

from benchd.core.trees import TreeBudgets, TreeLimits

# Floods: how often a refusal a caller can loop on is written down (docs/limits.md,
# "Floods"): at most one line per source per `every` seconds, however fast it loops.


class Floods:
    def __init__(self, every: float = 60.0, sources: int = 4096) -> None:
        self.every = every
        self.sources = sources
        # source -> [time of its last line, refusals since then (not logged yet)];
        # in the order of their last lines (oldest first), re-inserted on each line.
        self.seen: dict[Hashable, list[float]] = {}

    def count(self, source: Hashable, now: float) -> int:
        """One more refusal (or other loopable event) from `source`: the count to log it
        with, or 0 (counted only)."""
        got = self.seen.get(source)
        if got is not None and now - got[0] < self.every:
            got[1] += 1
            return 0
        count = 1 if got is None else int(got[1]) + 1
        if got is not None:
            del self.seen[source]
        elif len(self.seen) >= self.sources:
            del self.seen[next(iter(self.seen))]
        self.seen[source] = [now, 0]
        return count


# A token bucket: `burst` tokens, one back every `refill` seconds. The courier's wake
# bucket (one per recipient) and the send bucket (one per sender) are both one of these.


class TokenBucket:
    def __init__(self, burst: int, refill: float, now: float):
        self.burst = burst
        self.refill = refill
        self.tokens = float(burst)
        self.stamp = now

    def _top_up(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) / self.refill)
        self.stamp = now

    def take(self, now: float, n: int = 1) -> bool:
        self._top_up(now)
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def seconds_until(self, n: int, now: float) -> float:
        """How long until `n` tokens are there (0 if they are; never more than burst)."""
        self._top_up(now)
        return max(0.0, (n - self.tokens) * self.refill)

    def give_back(self, now: float) -> None:
        """Return a token that bought nothing (its mail was read before the wake)."""
        self._top_up(now)
        self.tokens = min(self.burst, self.tokens + 1.0)

    def next_token_at(self, now: float) -> float:
        """When the next whole token will be there (now, if one is)."""
        self._top_up(now)
        if self.tokens >= 1.0:
            return now
        return now + (1.0 - self.tokens) * self.refill


@dataclass(frozen=True)
class Limits:
    send_burst: int
    send_rate: float  # sends per second back into a bucket
    operator_send_burst: int
    operator_send_rate: float
    mailbox_messages: int
    mailbox_bytes: int
    reply_to_max: int
    tree_bytes: int = TreeLimits.bytes_per_hour
    tree_mailboxes: int = TreeLimits.mailboxes_per_hour


@dataclass(frozen=True)
class Refusal:
    code: str  # rate-limited, mailbox-full or too-many-recipients
    message: str
    limit: int
    count: int  # refusals it stands for in the logs (Floods.count; 0: only counted)
    retry_after: float | None = None  # seconds (rate-limited only)
    tree: str | None = None  # a tree's budget: the root's session id
    budget: str | None = None  # which: sends, bytes or mailboxes

    @property
    def announce(self) -> bool:
        return self.count > 0


class SendLimits:
    def __init__(self, limits: Limits, floods: Floods | None = None):
        self.limits = limits
        self.buckets: dict[str, TokenBucket] = {}
        # The daemon's one Floods, shared with the other refusals (waits, spawns, ...).
        self.floods = Floods() if floods is None else floods
        self.trees = TreeBudgets(TreeLimits(limits.tree_bytes, limits.tree_mailboxes))

    def _bucket(self, sender: str, operator: bool, now: float) -> TokenBucket:
        b = self.buckets.get(sender)
        if b is None:
            lim = self.limits
            burst, rate = (
                (lim.operator_send_burst, lim.operator_send_rate)
                if operator
                else (lim.send_burst, lim.send_rate)
            )
            b = self.buckets[sender] = TokenBucket(burst, 1.0 / rate, now)
        return b

    def _refuse(
        self,
        code: str,
        who: str,
        message: str,
        limit: int,
        now: float,
        retry_after: float | None = None,
        tree: str | None = None,
        budget: str | None = None,
    ) -> Refusal:
        count = self.floods.count((code, who), now)
        return Refusal(code, message, limit, count, retry_after, tree, budget)

    def recipients(self, sender: str, n: int, now: float) -> Refusal | None:
        cap = self.limits.reply_to_max
        if n <= cap:
            return None
        return self._refuse(
            "too-many-recipients",
            sender,
            f"the message has {n} reply-to addresses; the limit is {cap} "
            "(a reply goes to each of them): nothing was sent",
            cap,
            now,
        )

    def mailbox(
        self, to: str, unread: int, unread_bytes: int, size: int, now: float
    ) -> Refusal | None:
        lim = self.limits
        if unread + 1 > lim.mailbox_messages:
            what, cap = f"{unread:,} unread messages", lim.mailbox_messages
            unit = "messages"
        elif unread_bytes + size > lim.mailbox_bytes:
            what, cap = f"{unread_bytes:,} bytes of unread mail", lim.mailbox_bytes
            unit = "bytes"
        else:
            return None
        return self._refuse(
            "mailbox-full",
            to,
            f"{to}'s mailbox holds {what}; its limit is {cap:,} {unit} unread: nothing "
            f"was sent (it takes mail again once {to} reads some)",
            cap,
            now,
        )

    def take(self, sender: str, operator: bool, n: int, now: float) -> Refusal | None:
        b = self._bucket(sender, operator, now)
        if n > b.burst:
            return self._refuse(
                "rate-limited",
                sender,
                f"{n} sends at once is more than the {b.burst} a sender may make at once: "
                "nothing was sent",
                b.burst,
                now,
            )
        if b.take(now, n):
            return None
        wait = math.ceil(b.seconds_until(n, now) * 1000) / 1000  # never too early
        rate = 1.0 / b.refill
        return self._refuse(
            "rate-limited",
            sender,
            f"{sender} is sending too fast ({b.burst} sends at once, then {rate:g} a "
            f"second): nothing was sent; try again in {wait:g} s",
            b.burst,
            now,
            retry_after=wait,
        )

    def tree(
        self,
        sender: str,
        root: str,
        root_handle: str,
        n: int,
        size: int,
        mailboxes: int,
        now: float,
    ) -> Refusal | None:
        """Charge a session's request to its tree (root `root`): `n` sends of the root's
        bucket, `size` bytes and `mailboxes` new mailboxes of its hourly budgets; all of
        it or, refused, nothing."""
        who = f"tree:{root}"
        # A job draws on the budgets of the session at the top of its tree: say whose.
        tree = (
            f"{root_handle}'s tree"
            if sender == root_handle
            else (f"{root_handle}'s tree (of which {sender} is a job)")
        )
        over = self.trees.over(root, now, size, mailboxes)
        if over is not None:
            secs = math.ceil(over.retry_after)
            what = "bytes of mail" if over.budget == "bytes" else "new mailboxes"
            option = "--tree-bytes" if over.budget == "bytes" else "--tree-mailboxes"
            return self._refuse(
                "rate-limited",
                f"{who}:{over.budget}",
                f"{tree} has {'sent' if over.budget == 'bytes' else 'made'} {over.spent:,} "
                f"{what} in the last hour and this needs "
                f"{size if over.budget == 'bytes' else mailboxes:,} more; the limit is "
                f"{over.cap:,} an hour ({option}): nothing was sent; try again in {secs} s",
                over.cap,
                now,
                retry_after=float(secs),
                tree=root,
                budget=over.budget,
            )
        b = self._bucket(who, False, now)
        if n > b.burst or not b.take(now, n):
            wait: float | None = None
            if n <= b.burst:
                wait = math.ceil(b.seconds_until(n, now) * 1000) / 1000
            again = "" if wait is None else f"; try again in {wait:g} s"
            return self._refuse(
                "rate-limited",
                f"{who}:sends",
                f"{tree} is sending too fast ({b.burst} sends at once, then "
                f"{1.0 / b.refill:g} a second, for the whole tree): nothing was sent{again}",
                b.burst,
                now,
                retry_after=wait,
                tree=root,
                budget="sends",
            )
        self.trees.spend(root, now, size, mailboxes)
        return None
