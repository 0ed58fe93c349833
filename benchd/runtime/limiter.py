"""Limits at work (docs/limits.md): the sender limits (`Limiter`) and delegation's
(`Delegation`), decided by benchd.core.limits and benchd.core.trees.
"""

from collections.abc import Awaitable, Callable, Iterable

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.messages import LimitHit
from benchd.core.authority import Caller, CallerSession
from benchd.core.limits import Floods, Limits, Refusal, SendLimits
from benchd.core.names import OPERATOR, check_handle
from benchd.core.trees import DelegationLimits, Quota, Refused, derived_handle, root_of
from benchd.runtime.committer import Batch, Committer, EventOp
from benchd.runtime.mailroom import Mailroom
from benchd.runtime.roster import Roster, Session
from benchd.runtime.system import Log, fields_of
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
        # Mailboxes.exists: mail that makes a mailbox is paid for (--tree-mailboxes).
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
        self.log.warning("limit hit", retry_after=retry_after, **fields_of(hit))
        try:
            self.committer.enqueue(EventOp(hit))
        except WireError:
            pass  # stopping: benchd.log has it

    def refused(self, hit: LimitHit) -> None:
        """Another budget's refusal (the caller answers it), written down once per flood."""
        count = self.floods.count((hit.code, hit.sender, hit.budget), trio.current_time())
        if count:
            self.write_down(msgspec.structs.replace(hit, count=count))

    def recipients(self, sender: str, n: int) -> None:
        r = self.decide.recipients(sender, n, trio.current_time())
        if r is not None:
            raise self._refuse(r, sender)

    def mailbox(self, sender: str, to: str, size: int, batch: Batch | None = None) -> None:
        """Refuse a message that would take mailbox `to` past its unread caps. Checked
        again in the `batch` it commits in (`admit`), counting the batch's earlier sends,
        so a job's replies and mail from other nodes meet the caps too."""
        added = [0, 0] if batch is None else batch.unread.setdefault(to, [0, 0])
        unread, unread_bytes = self.index.unread(to)
        now = trio.current_time()
        r = self.decide.mailbox(to, unread + added[0], unread_bytes + added[1], size, now)
        if r is not None:
            raise self._refuse(r, sender, to)
        added[0] += 1
        added[1] += size

    admit = mailbox  # the mailroom's check where a send's batch commits

    def charge(
        self,
        caller: Caller,
        n: int = 1,
        size: int = 0,
        to: Iterable[str] = (),
        new_boxes: int = 0,
    ) -> None:
        """Charge `n` sends, `size` bytes, to the mailboxes `to` (and `new_boxes` made for
        sure: a job's child) to the operator's bucket or the session's tree; a refusal
        spends nothing."""
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


class Delegation:
    def __init__(
        self,
        roster: Roster,
        mailroom: Mailroom,
        record: Callable[..., Awaitable[bool]],
        log: Log,
        limits: DelegationLimits,
        floods: Floods | None = None,
    ) -> None:
        self.roster = roster
        self.mailroom = mailroom
        self.record = record  # the committer's: logs events
        self.log = log
        self.quota = Quota(limits)
        self.floods = Floods() if floods is None else floods  # the daemon's one

    async def prepare(self, caller: Caller, req: m.Spawn) -> m.Spawn:
        """A session's spawn made ready for `Sessions.reserve`: the limits checked, the
        child's handle chosen (fresh), the reply-to defaulted to the spawner."""
        parent = caller.session
        assert parent is not None, "only a session's spawn is a delegation"
        assert req.job is not None, "authority lets a session spawn only jobs"
        depth = len(parent.lineage) + 1
        try:
            self.quota.check(
                parent.id, parent.handle, depth, trio.current_time(), root=root_of(parent)
            )
        except Refused as err:
            count = self.floods.count((err.code, parent.id), trio.current_time())
            if not count:
                raise  # answered; written down with its flood's next line
            limited = m.JobLimited(
                session=parent.id,
                handle=parent.handle,
                code=err.code,
                limit=err.limit,
                value=err.value,
                count=count,
            )
            self.log.warning("spawn refused by a delegation limit", **fields_of(limited))
            await self.record(limited)
            raise
        name = req.name
        if name is None:
            name = derived_handle(parent.handle, self.mailroom.mailboxes.exists)
        else:
            check_handle(name, "name")
            if name != OPERATOR and self.mailroom.mailboxes.exists(name):
                held = (
                    "a live session holds it"
                    if name in self.roster.live
                    else ("its mailbox exists (mail may be waiting for whoever holds it)")
                )
                raise WireError(
                    "handle-taken",
                    f"a session may give its job only a fresh handle; {name!r} is not: {held}",
                )
        job = req.job
        if not job.reply_to:
            job = msgspec.structs.replace(job, reply_to=[parent.handle])
        return msgspec.structs.replace(req, name=name, job=job)

    def started(self, parent: CallerSession, child: Session) -> None:
        child.delegated_by(parent)
        # Its spawns count against its tree's root, whose window outlives any one job.
        self.quota.started(parent.id, child.id, trio.current_time(), root=root_of(parent))

    def settled(self, child: Session) -> None:
        if child.parent is not None:
            self.quota.settled(child.parent, child.id)

    def delegated(self, child: Session) -> m.JobDelegated:
        assert child.parent is not None and child.parent_handle is not None, "see started()"
        return m.JobDelegated(
            parent=child.parent,
            parent_handle=child.parent_handle,
            child=child.id,
            child_handle=child.handle,
            reply_to=child.reply_to(),
            depth=len(child.lineage),
        )
