"""Sender limits: what a flood meets and no real agent does. Pure (no I/O, no clock).

Three limits, each a daemon option (`Limits`):

- a send bucket per sender (`--send-burst` sends at once, `--send-rate` back per
  second; the operator has its own, larger, pair): refused with `rate-limited` and the
  seconds until the sends would fit;
- a cap per mailbox on what waits unread (`--mailbox-messages`, `--mailbox-bytes`):
  refused with `mailbox-full`. Reading and retiring are never limited, so the owner (or
  the operator) can always empty it;
- at most `--reply-to-max` reply-to addresses on one message: refused with
  `too-many-recipients`. That also bounds a reply's fan-out, which goes to them.

A refusal says whether it is news (`announce`): the first of a run of refusals for the
same sender (or mailbox) is logged and evented, the rest are not, until a send of that
sender (or to that mailbox) succeeds again. A flood thus costs the event log one line.
"""

import math
from dataclasses import dataclass

from benchd.core.bucket import TokenBucket


@dataclass(frozen=True)
class Limits:
    send_burst: int
    send_rate: float  # sends per second back into a bucket
    operator_send_burst: int
    operator_send_rate: float
    mailbox_messages: int
    mailbox_bytes: int
    reply_to_max: int


@dataclass(frozen=True)
class Refusal:
    code: str  # rate-limited, mailbox-full or too-many-recipients
    message: str
    limit: int
    announce: bool  # the first of a run: log it and record an event
    retry_after: float | None = None  # seconds (rate-limited only)


class SendLimits:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.buckets: dict[str, TokenBucket] = {}
        self.firing: set[tuple[str, str]] = set()  # (code, sender or mailbox) refusing now

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
        self, code: str, who: str, message: str, limit: int, retry_after: float | None = None
    ) -> Refusal:
        announce = (code, who) not in self.firing
        self.firing.add((code, who))
        return Refusal(code, message, limit, announce, retry_after)

    def recipients(self, sender: str, n: int) -> Refusal | None:
        """Whether a message may carry `n` reply-to addresses."""
        cap = self.limits.reply_to_max
        if n <= cap:
            self.firing.discard(("too-many-recipients", sender))
            return None
        return self._refuse(
            "too-many-recipients",
            sender,
            f"the message has {n} reply-to addresses; the limit is {cap} "
            "(a reply goes to each of them): nothing was sent",
            cap,
        )

    def mailbox(self, to: str, unread: int, unread_bytes: int, size: int) -> Refusal | None:
        """Whether one more unread message of `size` bytes fits in mailbox `to`."""
        lim = self.limits
        if unread + 1 > lim.mailbox_messages:
            what, cap = f"{unread:,} unread messages", lim.mailbox_messages
            unit = "messages"
        elif unread_bytes + size > lim.mailbox_bytes:
            what, cap = f"{unread_bytes:,} bytes of unread mail", lim.mailbox_bytes
            unit = "bytes"
        else:
            self.firing.discard(("mailbox-full", to))
            return None
        return self._refuse(
            "mailbox-full",
            to,
            f"{to}'s mailbox holds {what}; its limit is {cap:,} {unit} unread: nothing "
            f"was sent (it takes mail again once {to} reads some)",
            cap,
        )

    def take(self, sender: str, operator: bool, n: int, now: float) -> Refusal | None:
        """Spend `n` sends of the sender's bucket, or refuse (spending nothing)."""
        b = self._bucket(sender, operator, now)
        if n > b.burst:
            return self._refuse(
                "rate-limited",
                sender,
                f"{n} sends at once is more than the {b.burst} a sender may make at once: "
                "nothing was sent",
                b.burst,
                retry_after=None,
            )
        if b.take(now, n):
            self.firing.discard(("rate-limited", sender))
            return None
        wait = math.ceil(b.seconds_until(n, now) * 1000) / 1000  # never too early
        rate = 1.0 / b.refill
        return self._refuse(
            "rate-limited",
            sender,
            f"{sender} is sending too fast ({b.burst} sends at once, then {rate:g} a "
            f"second): nothing was sent; try again in {wait:g} s",
            b.burst,
            retry_after=wait,
        )
