"""Delegation wired into the daemon: a session's spawn checked, named and counted.

The rules and the limits are decided in benchd.core.trees; this service supplies
what they need (who is live, which mailboxes exist, the clock), logs and records a
limit that fires (`job/limited`: one line per flood, benchd.core.limits), records `job/delegated` for each child started, and
counts each child against its spawner until the child's job settles.
"""

import os
from collections.abc import Awaitable, Callable

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.authority import Caller, CallerSession
from benchd.core.limits import Floods
from benchd.core.names import OPERATOR, check_handle
from benchd.core.trees import DelegationLimits, Quota, Refused, derived_handle, root_of
from benchd.runtime.mailroom import Mailroom
from benchd.runtime.roster import Roster, Session
from benchd.runtime.system import Log


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

    def _taken(self, handle: str) -> bool:
        """Held by a live session, or a mailbox exists for it (mail may be waiting)."""
        return (
            handle == OPERATOR
            or self.roster.is_live(handle)
            or os.path.isdir(self.mailroom.box(handle))
        )

    async def prepare(self, caller: Caller, req: m.Spawn) -> m.Spawn:
        """A session's spawn made ready for `Sessions.reserve`: the limits checked, the
        child's handle chosen (fresh), the reply-to defaulted to the spawner. Raises a
        WireError the caller sees."""
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
            self.log.warning(
                "spawn refused by a delegation limit",
                session=parent.id,
                handle=parent.handle,
                code=err.code,
                limit=err.limit,
                value=err.value,
                count=count,
            )
            await self.record(
                m.JobLimited(
                    session=parent.id,
                    handle=parent.handle,
                    code=err.code,
                    limit=err.limit,
                    value=err.value,
                    count=count,
                )
            )
            raise
        name = req.name
        if name is None:
            name = derived_handle(parent.handle, self._taken)
        else:
            check_handle(name, "name")
            if name != OPERATOR and self._taken(name):
                held = (
                    "a live session holds it"
                    if self.roster.is_live(name)
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
        """The child is reserved: it counts against its spawner from now on."""
        child.parent = parent.id
        child.parent_handle = parent.handle
        child.lineage = (parent.id, *parent.lineage)
        child.root_handle = getattr(parent, "root_handle", None) or parent.handle
        # Its spawns count against its tree's root, whose window outlives any one job.
        self.quota.started(parent.id, child.id, trio.current_time(), root=root_of(parent))

    def settled(self, child: Session) -> None:
        """The child's job settled (or its spawn failed): it no longer counts."""
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
