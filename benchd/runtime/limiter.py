"""The sender limits at work: benchd.core.limits' decisions, with the clock, the index's
unread tally, benchd.log and the event log.

The mail handlers ask before a caller's send reaches the mailroom (mail/send, mail/reply,
and a job's reply-to list at spawn). A job's replies and mail arriving from other nodes
are not charged here: they are bounded where they began (the job's reply-to list, the
sending node's own limits). A refusal raises WireError; the first of a run of refusals
is logged and recorded as a `limit/hit` event.
"""

import time
from collections.abc import Callable

from bench_wire.errors import WireError
from bench_wire.messages import LimitHit
from benchd.core.limits import Limits, Refusal, SendLimits
from benchd.runtime.committer import Batch, Committer, EventOp
from benchd.runtime.logs import Log
from benchd.store.index import Index


class Limiter:
    def __init__(
        self,
        limits: Limits,
        index: Index,
        committer: Committer,
        log: Log,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limits = limits
        self.decide = SendLimits(limits)
        self.index = index
        self.committer = committer
        self.log = log
        self.clock = clock

    def _refuse(self, r: Refusal, sender: str, mailbox: str | None = None) -> WireError:
        if r.announce:
            self.log.warning(
                "limit hit",
                code=r.code,
                sender=sender,
                mailbox=mailbox,
                limit=r.limit,
                retry_after=r.retry_after,
            )
            try:
                self.committer.enqueue(
                    EventOp(LimitHit(code=r.code, sender=sender, mailbox=mailbox, limit=r.limit))
                )
            except WireError:
                pass  # stopping: benchd.log has it
        return WireError(r.code, r.message, r.retry_after)

    def recipients(self, sender: str, n: int) -> None:
        """Refuse a message (or a job) with more reply-to addresses than the limit."""
        r = self.decide.recipients(sender, n)
        if r is not None:
            raise self._refuse(r, sender)

    def mailbox(self, sender: str, to: str, size: int) -> None:
        """Refuse a message that would take mailbox `to` past its unread limits."""
        unread, unread_bytes = self.index.unread(to)
        r = self.decide.mailbox(to, unread, unread_bytes, size)
        if r is not None:
            raise self._refuse(r, sender, to)

    def admit(self, sender: str, to: str, size: int, batch: Batch) -> None:
        """Where the batch commits: refuse a message that would take mailbox `to` past its
        unread caps, counting what earlier sends of the same batch add; else count it."""
        added = batch.unread.setdefault(to, [0, 0])
        unread, unread_bytes = self.index.unread(to)
        r = self.decide.mailbox(to, unread + added[0], unread_bytes + added[1], size)
        if r is not None:
            raise self._refuse(r, sender, to)
        added[0] += 1
        added[1] += size

    def charge(self, sender: str, operator: bool, n: int = 1) -> None:
        """Spend `n` sends of the sender's bucket, or refuse with rate-limited."""
        r = self.decide.take(sender, operator, n, self.clock())
        if r is not None:
            raise self._refuse(r, sender)
