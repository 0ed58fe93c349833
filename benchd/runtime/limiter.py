"""The sender limits at work: benchd.core.limits' decisions, with the clock, the index's
unread tally, benchd.log and the event log.

The mail handlers ask before a caller's send reaches the mailroom (mail/send, mail/reply),
and the spawner before a job starts (its task mail is a send, and so is each reply it
owes: charged then, to the spawner's tree). A session is charged to its tree's budgets
(benchd.core.trees), the operator to its own bucket. A mailbox's unread caps are checked
again where each send's batch commits (`admit`), for every send into a mailbox: a job's
replies and mail from other nodes too. A refusal raises WireError; one line per flood
and source (benchd.core.limits) is logged and recorded as a `limit/hit` event, with the
count of refusals it stands for. `refused` does the same for the daemon's other
budgets (connections per tree).
"""

from collections.abc import Callable, Iterable

import msgspec
import trio

from bench_wire.errors import WireError
from bench_wire.messages import LimitHit
from benchd.core.authority import Caller
from benchd.core.limits import Floods, Limits, Refusal, SendLimits
from benchd.core.trees import root_of
from benchd.runtime.committer import Batch, Committer, EventOp
from benchd.runtime.system import Log
from benchd.store.index import Index


class Limiter:
    def __init__(
        self,
        limits: Limits,
        index: Index,
        committer: Committer,
        log: Log,
        mailbox_exists: Callable[[str], bool] = lambda handle: True,
        floods: Floods | None = None,
    ):
        self.limits = limits
        self.decide = SendLimits(limits, floods)
        self.floods = self.decide.floods
        self.index = index
        self.committer = committer
        self.log = log
        # Whether a handle has a mailbox (or a live session): the daemon gives it
        # `Mailboxes.exists`. Mail to a handle without one makes a mailbox, which a
        # session's tree pays for (--tree-mailboxes).
        self.mailbox_exists = mailbox_exists

    def _refuse(self, r: Refusal, sender: str, mailbox: str | None = None) -> WireError:
        if r.announce:
            self.write_down(
                LimitHit(
                    code=r.code,
                    sender=sender,
                    mailbox=mailbox,
                    limit=r.limit,
                    tree=r.tree,
                    budget=r.budget,
                    count=r.count,
                ),
                r.retry_after,
            )
        return WireError(r.code, r.message, r.retry_after)

    def write_down(self, hit: LimitHit, retry_after: float | None = None) -> None:
        """One line of a flood: to benchd.log and, as a limit/hit event, the event log."""
        self.log.warning(
            "limit hit",
            code=hit.code,
            sender=hit.sender,
            mailbox=hit.mailbox,
            limit=hit.limit,
            retry_after=retry_after,
            tree=hit.tree,
            budget=hit.budget,
            count=hit.count,
        )
        try:
            self.committer.enqueue(EventOp(hit))
        except WireError:
            pass  # stopping: benchd.log has it

    def refused(self, hit: LimitHit) -> None:
        """Another budget's refusal (the caller answers it): written down as one line per
        flood of its code, sender and budget."""
        count = self.floods.count((hit.code, hit.sender, hit.budget), trio.current_time())
        if count:
            self.write_down(msgspec.structs.replace(hit, count=count))

    def recipients(self, sender: str, n: int) -> None:
        """Refuse a message (or a job) with more reply-to addresses than the limit."""
        r = self.decide.recipients(sender, n, trio.current_time())
        if r is not None:
            raise self._refuse(r, sender)

    def mailbox(self, sender: str, to: str, size: int) -> None:
        """Refuse a message that would take mailbox `to` past its unread limits."""
        unread, unread_bytes = self.index.unread(to)
        r = self.decide.mailbox(to, unread, unread_bytes, size, trio.current_time())
        if r is not None:
            raise self._refuse(r, sender, to)

    def admit(self, sender: str, to: str, size: int, batch: Batch) -> None:
        """Where the batch commits: refuse a message that would take mailbox `to` past its
        unread caps, counting what earlier sends of the same batch add; else count it."""
        added = batch.unread.setdefault(to, [0, 0])
        unread, unread_bytes = self.index.unread(to)
        now = trio.current_time()
        r = self.decide.mailbox(to, unread + added[0], unread_bytes + added[1], size, now)
        if r is not None:
            raise self._refuse(r, sender, to)
        added[0] += 1
        added[1] += size

    def charge(
        self,
        caller: Caller,
        n: int = 1,
        size: int = 0,
        to: Iterable[str] = (),
        new_boxes: int = 0,
    ) -> None:
        """Charge a request of `n` sends, `size` bytes of mail, to the mailboxes `to`: the
        operator's own bucket, or a session's tree (its root's bucket and its hourly bytes
        and new mailboxes: benchd.core.trees); `new_boxes` mailboxes more are made for
        sure (a job's child). Refused with rate-limited, spending nothing."""
        now = trio.current_time()  # the buckets' time: trio's clock
        s = caller.session
        if s is None:
            r = self.decide.take(caller.handle, True, n, now)
        else:
            new = new_boxes + sum(1 for h in set(to) if not self.mailbox_exists(h))
            root_handle = getattr(s, "root_handle", None) or s.handle
            r = self.decide.tree(caller.handle, root_of(s), root_handle, n, size, new, now)
        if r is not None:
            raise self._refuse(r, caller.handle)
