"""session/spawn carried out: the session reserved and started, its job made and its task
delivered, its delegation counted, its events logged, and every step undone when a
later one fails.

The order is the point: the handle is held before the task is mailed (so the task
already counts as mail to a live session), and the task is in the child's inbox before
the child runs (it may read at once). What each failure owes:

- before the process starts (a refused task): the reservation is released, the child
  no longer counts against its spawner, and the job, which never ran and told no one,
  is closed with no replies;
- the process cannot start: the job was promised a reply, so it settles as failed;
  unless the daemon began stopping meanwhile (`shutting-down`): then nothing ran, and
  it is undone as a refused task is;
- the spawn events cannot be logged (the daemon is stopping): nothing happened, so the
  child is ended and its job closed quietly (cancelled).
"""

from collections.abc import Awaitable, Callable

import msgspec

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.authority import Caller
from benchd.core.names import is_handle
from benchd.runtime.committer import EventOp
from benchd.runtime.delegation import Delegation
from benchd.runtime.jobhost import JobHost
from benchd.runtime.limiter import Limiter
from benchd.runtime.roster import Session
from benchd.runtime.sessions import Sessions


class Spawner:
    def __init__(
        self,
        sessions: Sessions,
        jobs: JobHost,
        delegation: Delegation,
        limiter: Limiter,
        submit: Callable[[EventOp], Awaitable[object]],
    ) -> None:
        self.sessions = sessions
        self.jobs = jobs
        self.delegation = delegation
        self.limiter = limiter
        self.submit = submit  # the committer's: durable before it returns, or raises

    async def spawn(self, caller: Caller, req: m.Spawn) -> m.SpawnOk:
        """Start the session a spawn asks for; its answer, with the request's id unset."""
        jobs, sessions, delegation = self.jobs, self.sessions, self.delegation
        parent = caller.session  # None: the operator's spawn; else a delegation
        if parent is not None:
            req = await delegation.prepare(caller, req)
        if req.job is not None:
            req = _one_copy_each(req)
            job = req.job
            assert job is not None, "the same spawn, its reply-to list once each"
            reply_to = job.reply_to
            self.limiter.recipients(caller.handle, len(reply_to))  # a reply goes to each
            jobs.check_spec(job, caller)
            # The task mail is a send, and so is each reply the job owes: charged now, to
            # the spawner's tree (or the operator), with the child's new mailbox and any
            # reply-to mailbox the replies would make.
            local = [h for h in reply_to if is_handle(h) and h != req.name]
            self.limiter.charge(
                caller,
                1 + len(reply_to),
                len(job.body.encode("utf-8", "surrogatepass")),
                local,
                new_boxes=1,
            )
        s = sessions.reserve(req)
        if parent is not None:
            delegation.started(parent, s)  # no await since prepare: the limits still hold
        mail_id = None
        if req.job is not None:
            try:
                jobs.begin(s, req.job, caller)
                mail_id = await jobs.deliver_task(s, req.job, caller)
            except BaseException:
                self._unreserve(s)
                raise
        try:
            sessions.launch(s)
        except WireError as err:
            if err.code == "shutting-down":
                # Never started (the daemon stops): as a refused task, nothing ran.
                self._unreserve(s)
                raise
            if s.job is not None:
                s.exited_with(127, None)
                s.outcome = await jobs.settle(s)
            delegation.settled(s)
            raise
        assert s.term is not None, "launch() started its terminal"
        events: list[m.Event] = [
            m.SessionSpawned(
                session=s.id, handle=s.handle, pid=s.term.pid, argv=s.argv, job=s.job is not None
            )
        ]
        if parent is not None:
            events.append(delegation.delegated(s))
        try:
            await self.submit(EventOp(*events))
        except WireError:
            s.withdraw()
            await sessions.end(s, grace=0.5)
            raise
        return m.SpawnOk(session=s.id, handle=s.handle, pid=s.term.pid, mail_id=mail_id)

    def _unreserve(self, s: Session) -> None:
        self.sessions.release(s)
        self.delegation.settled(s)
        if s.job is not None:
            self.jobs.abandon(s)


def _one_copy_each(req: m.Spawn) -> m.Spawn:
    """The job's reply-to list with each address once (a reply goes to each entry: the
    same address listed again would get another copy)."""
    assert req.job is not None
    once = list(dict.fromkeys(req.job.reply_to))
    if len(once) == len(req.job.reply_to):
        return req
    return msgspec.structs.replace(req, job=msgspec.structs.replace(req.job, reply_to=once))
