"""Jobs wired into the daemon: the fan-out core (benchd.core.jobs) on real, durable ports.

- outbox   -> SqliteOutbox (BENCH_DIR/outbox.sqlite)
- post     -> delivery into the recipient's mailbox through the mailroom, keyed by the
              reply key and sent as the child, so a repeat after a crash is a duplicate
              the mailroom recognises, never a second message; the mail/sent event
              wakes a live recipient through the reactor like any other mail
- schedule_wake -> a trio timer; the due times live in the rows themselves, and every
              start drains at once, so a restart delivers whatever is due
- now      -> the injected wall clock's time in ms (benchd.core.clock)

A job is a spawn with task mail (`bench spawn --mail FILE --reply-to H`). Its session's
exit settles it, in the words of bench_wire.outcomes (`outcome_of`): exit 0 ->
completed; another exit or a signal of its own -> failed (reason exit-code, signal);
`bench kill` -> interrupted (killed), its deadline -> interrupted (deadline), the daemon
stopping or found running at daemon start (its session died with the old daemon) ->
interrupted (daemon-stopped); `bench kill --cancel` -> cancelled (quiet). The content
owed is the last `bench report`. Replies are in the task's thread: `Re: <its subject>
(<outcome>)`, in reply to the task mail.
"""

import math
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import trio

from bench_wire import messages as m
from bench_wire.addresses import resolve
from bench_wire.errors import WireError
from benchd.core.caller import Caller
from benchd.core.clock import SYSTEM_WALL, WallClock
from benchd.core.jobs import (
    Address,
    AgentWork,
    FanOut,
    Job,
    JobError,
    JobMail,
    Outcome,
    agent_job,
    decode_agent_job,
)
from benchd.core.keys import check_client_key, job_key_of
from benchd.core.sends import Queue
from benchd.runtime.committer import Committer, EventOp
from benchd.runtime.logs import Log
from benchd.runtime.mailroom import Mailroom, SendOp
from benchd.runtime.outbound import Outbound
from benchd.runtime.roster import Session
from benchd.store import faults
from benchd.store.index import Index
from benchd.store.outbox import SqliteOutbox


@dataclass(frozen=True, slots=True)
class Ending:
    """How a job's session ended: the reply header fields documented in docs/jobs.md.

    Invariants: `killed_by` is set exactly when `ended` is killed; a session that
    exited has an `exit_code`; daemon-stopped has neither code nor signal.
    """

    ended: Literal["exited", "signalled", "killed", "daemon-stopped"]
    exit_code: int | None = None
    signal: str | None = None  # the signal's name (SIGTERM), as the header says it
    killed_by: str | None = None
    reason: str | None = None  # the outcome's reason (bench_wire.outcomes), if it has one

    def fields(self) -> dict[str, str | int]:
        """The header fields in their documented order: `reason` (when the outcome has
        one), `ended`, then `exitCode` or `signal`, and `killedBy` when `bench kill`
        ended it."""
        out: dict[str, str | int] = {} if self.reason is None else {"reason": self.reason}
        out["ended"] = self.ended
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.signal is not None:
            out["signal"] = self.signal
        if self.killed_by is not None:
            out["killedBy"] = self.killed_by
        return out


@dataclass(slots=True)
class Settlement:
    """One job settling, waiting for the batch that writes its replies.

    Invariants: it is in `JobHost._settling` from the moment it is made until a batch
    takes it; `done` is set exactly once, after that batch's transaction committed or
    failed (a failed one leaves the job running in the outbox: settled at next start).
    """

    session: str
    handle: str
    job: Job
    outcome: Outcome
    content: str  # the reply's body after its header: the last report, or a sentence
    ending: Ending
    recovered: bool = False  # found running at start (the previous daemon's job)
    done: trio.Event = field(default_factory=trio.Event)


class JobHost:
    def __init__(
        self,
        outbox: SqliteOutbox,
        find_session: Callable[[str], "Session | None"],
        mailroom: Mailroom,
        committer: Committer,
        index: Index,
        body_bytes: int,
        retry_base: float,
        log: Log,
        wall: WallClock = SYSTEM_WALL,
        outbound: Outbound | None = None,
    ) -> None:
        self.outbox = outbox
        self.find_session = find_session  # a live session by handle, or None
        self.mailroom = mailroom
        self.committer = committer
        self.index = index
        self.body_bytes = body_bytes
        self.log = log
        # Wall-clock ms: the replies' due times are stored in the outbox and read back by
        # the next daemon, so a monotonic reading would mean nothing to it.
        self.wall = wall
        self.fanout = FanOut(
            self.outbox,
            self._post,
            self._schedule_wake,
            wall.wall_ms,
            retry_base_ms=int(retry_base * 1000),
        )
        self._wake_at = math.inf
        self._poke = trio.Event()
        self._drain_lock = trio.Lock()  # one drain at a time; stop() waits for it
        self._settling: list[Settlement] = []  # waiting for the next transaction
        self._stopping = False
        self.outbound = outbound  # replies to handle@node go there

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Settle the jobs the previous daemon left running, then drain the outbox when
        replies are due; batched settlements run in this service's nursery."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            await self._start()
            nursery.start_soon(self._timer)
            task_status.started()
            await trio.sleep_forever()  # settlements may still come after the timer stops

    async def _start(self) -> None:
        # Jobs whose sessions died with the previous daemon: interrupted, and by their
        # deadline when it has passed by now (while the daemon was down, or before).
        now = self.wall.wall_ms()
        deadlines: list[m.Event] = []
        for row in self.outbox.running_jobs():
            try:
                job = Job.from_json(row.job)
            except JobError as err:
                # Not a job this daemon wrote (edited by hand?): left in the outbox, as
                # it is, and said; the other jobs are settled.
                self.log.error("a stored job does not load", session=row.session, error=err.message)
                continue
            past = row.deadline_ms is not None and row.deadline_ms <= now
            ending = Ending("daemon-stopped", reason="deadline" if past else "daemon-stopped")
            if past:
                mail = decode_agent_job(job).mail
                deadlines.append(
                    m.JobDeadline(
                        session=row.session,
                        handle=row.handle,
                        key=mail.key if mail else "",
                        deadline_ms=row.deadline_ms or 0,
                        recovered=True,
                    )
                )
            content = row.content or ending_sentence(row.session, row.handle, ending)
            self._settling.append(
                Settlement(
                    row.session,
                    row.handle,
                    job,
                    Outcome.INTERRUPTED,
                    content,
                    ending,
                    recovered=True,
                )
            )
        if deadlines:
            await self.committer.record(*deadlines)
        if self._settling:
            await self._settle_batch()
        self._schedule_wake(self.wall.wall_ms())

    # ------------------------------------------------------------ ports

    def _schedule_wake(self, at_ms: int) -> None:
        if at_ms < self._wake_at:
            self._wake_at = at_ms
            self._poke.set()

    async def _timer(self) -> None:
        while True:
            if self._wake_at is math.inf:
                await self._poke.wait()
                self._poke = trio.Event()
                continue
            delay = (self._wake_at - self.wall.wall_ms()) / 1000
            if delay > 0:
                with trio.move_on_after(delay):
                    await self._poke.wait()
                    self._poke = trio.Event()
                    continue
            self._wake_at = math.inf
            if self._stopping:
                return
            async with self._drain_lock:
                try:
                    await self.fanout.drain_outbox()
                except Exception:  # noqa: BLE001 - e.g. the outbox's disk is full
                    self.log.exception("draining the outbox failed; retrying in 5 s")
                    self._schedule_wake(self.wall.wall_ms() + 5000)

    async def stop(self) -> None:
        """At a clean stop: no new timed drains; deliver what the last settlements owe."""
        self._stopping = True
        async with self._drain_lock:
            try:
                for _ in range(64):  # bounded: replies left over are drained at next start
                    report = await self.fanout.drain_outbox()
                    if not report.more:
                        break
            except Exception:  # noqa: BLE001 - left in the outbox for the next start
                self.log.exception("draining the outbox at stop failed")

    def _post(self, mail: JobMail) -> Awaitable[bool]:
        """The post port. The delivery is queued at once (so a page of replies shares one
        commit); the returned coroutine answers whether it was accepted."""
        # Every reply the fan-out writes carries its outcome; a row without one is named
        # plainly rather than guessed from its body.
        outcome = mail.outcome or "reply"
        task_key = job_key_of(mail.key) or mail.key
        to = mail.to.agent_id
        # In the task's thread: `Re: <task subject> (<outcome>)`, in reply to the task.
        # A job made before replies were threaded has no stored subject: its key names it.
        task_id, task_subject = self.outbox.task_of(task_key)
        suffix = f" ({outcome})"
        subject = f"Re: {task_subject or task_key}"[: 200 - len(suffix)] + suffix
        try:
            faults.check("post")
            if "@" in to:
                # Another node: queued for the bridge with the outbound queue's guarantees
                # (durable before accepted; the key makes a repeat a no-op).
                assert self.outbound is not None, "the daemon builds it with the outbound queue"
                # (The task's id is this node's; the other node's thread starts here.)
                op = self.outbound.make_queue(
                    mail.from_.agent_id, to, mail.content, subject, mail.key, outbox_reply=True
                )
            else:
                send = self.mailroom.check_send(
                    mail.from_.agent_id,
                    to,
                    mail.content,
                    subject=subject,
                    key=mail.key,
                    in_reply_to=task_id,
                    outbox_reply=True,  # outbox/posted in the same commit
                )
                op = SendOp(self.mailroom, send)
            self.committer.enqueue(op)
        except (WireError, OSError) as err:
            return self._refused(mail, err)
        return self._answer(mail, op)

    async def _refused(self, mail: JobMail, err: Exception) -> bool:
        reason = err.message if isinstance(err, WireError) else str(err)
        code = err.code if isinstance(err, WireError) else None
        await self.committer.record(
            m.OutboxRetry(key=mail.key, to=mail.to.agent_id, reason=reason, code=code)
        )
        return False

    async def _answer(self, mail: JobMail, op: SendOp) -> bool:
        try:
            res = await op.wait()
        except WireError as err:
            return await self._refused(mail, err)
        if isinstance(op.spec, Queue):  # to another node: the bridge is told
            assert self.outbound is not None, "the daemon wires the outbound queue"
            res = self.outbound.queued_as(op, res)
        if res.to != mail.to.agent_id:
            # The key was taken by other mail (client keys may not start with outbox:,
            # so this is a bug, not a user error): never count it as this reply.
            return await self._refused(
                mail, WireError("internal", "the reply key names other mail")
            )
        if res.duplicate:
            # Delivered before a crash, its receipt lost: the mailroom knew the key.
            await self.committer.record(
                m.OutboxPosted(key=mail.key, to=mail.to.agent_id, mail_id=res.mail_id)
            )
        return True

    # ------------------------------------------------------------ jobs

    def _local(self, address: str) -> str:
        """`h@<this node>` is the local handle h; anything else is left as it is."""
        own = self.outbound.node if self.outbound is not None else None
        handle, node = resolve(address, own, None, "reply-to")
        return handle if node is None else address

    def _address(self, handle: str) -> Address:
        handle = self._local(handle)
        if "@" in handle:
            return Address(agent_id=handle, session_id=handle)  # on another node
        live = self.find_session(handle)
        # The operator and handles without a live session are addressed by handle.
        return Address(agent_id=handle, session_id=live.id if live else handle)

    def check_spec(self, spec: m.JobMailSpec, caller: Caller) -> None:
        """Refuse a bad job before anything is spawned."""
        own, knows = None, None
        if self.outbound is not None:
            own, knows = self.outbound.node, self.outbound.directory.knows
        for h in spec.reply_to:
            # Any address the spawner could mail: a handle, or handle@<a known node>.
            resolve(h, own, knows, "reply-to")
        if spec.key is None:
            return
        check_client_key(spec.key)
        # A key names one request: reusing it would hand back the old task and replies.
        if self.outbox.has_job_key(spec.key) or self.index.find_key(caller.handle, spec.key):
            raise WireError(
                "key-used",
                f"the key {spec.key!r} already names another job or "
                "message; a new job needs a new key",
            )

    def begin(self, s: "Session", spec: m.JobMailSpec, caller: Caller) -> None:
        """Make the job for a just-spawned session and persist it (no await: the session
        cannot settle before its job exists)."""
        try:
            mail = JobMail(
                key=spec.key or f"job-{s.id}",
                to=Address(agent_id=s.handle, session_id=s.id),
                from_=Address(
                    agent_id=caller.handle,
                    session_id=caller.session.id if caller.session else caller.handle,
                ),
                reply_to=tuple(self._address(h) for h in spec.reply_to),
                content=spec.body,
                created_at=self.wall.wall_ms(),
            )
            job = agent_job(AgentWork(session_id=s.id), mail)
        except JobError as err:
            raise WireError("bad-mail", f"the job could not be made: {err.message}") from None
        with self.outbox:
            self.outbox.add_job(s.id, s.handle, job.to_json(), s.deadline_ms)
        s.job = job

    def abandon(self, s: "Session") -> None:
        """The spawn failed before the child ran: the job is closed with no replies."""
        with self.outbox:
            self.outbox.mark_settled(s.id, str(Outcome.ABANDONED))

    async def deliver_task(self, s: "Session", spec: m.JobMailSpec, caller: Caller) -> str:
        """The task mail, from the spawner to the child (it wakes the child when ready)."""
        assert s.job is not None, "begin() made the job"
        mail = decode_agent_job(s.job).mail
        assert mail is not None, "a job spawned with a task has its mail"
        subject = spec.subject or "task"
        res = await self.mailroom.send(
            caller.handle, s.handle, spec.body, subject, key=mail.key, reply_to=list(spec.reply_to)
        )
        self.outbox.set_task(s.id, res.mail_id, subject)  # the replies' thread
        return res.mail_id

    async def report(self, caller: Caller, content: str) -> int:
        s = caller.session
        if s is None:
            raise WireError("not-in-session", "bench report works only inside a bench session")
        if s.job is None:
            raise WireError("no-job", f"session {s.handle} is not running a job")
        data = content.encode("utf-8", "surrogatepass")
        if len(data) > self.body_bytes - 512:
            raise WireError("body-too-large", "the report is larger than the body cap")
        with self.outbox:
            if not self.outbox.report(s.id, content):
                raise WireError("no-job", f"the job of {s.handle} has already settled")
        live = self.find_session(s.handle)
        if live is not None and live.id == s.id:
            live.reported = True  # it has said something: no stall mail is owed for it
        await self.committer.submit(
            EventOp(m.JobReported(session=s.id, handle=s.handle, bytes=len(data)))
        )
        return len(data)

    async def settle(self, s: "Session") -> str:
        """Settle the job of an exited session; returns its outcome."""
        assert s.job is not None, "only a job's session is settled here"
        outcome, reason = outcome_of(s.cancelled, s.deadline_hit, s.killed_by, s.exit)
        row = self.outbox.job(s.id)
        content = row.content if row else ""
        ending = ending_of(s.exit, s.signal, s.killed_by, reason)
        if not content:
            content = ending_sentence(s.id, s.handle, ending)
        await self._settle_job(Settlement(s.id, s.handle, s.job, outcome, content, ending))
        s.reason = reason
        return str(outcome)

    async def _settle_job(self, settlement: Settlement) -> None:
        """Settle one job; settlements arriving together share one durable transaction."""
        self._settling.append(settlement)
        if len(self._settling) == 1:
            self.nursery.start_soon(self._settle_batch)
        await settlement.done.wait()

    async def _settle_batch(self) -> None:
        await trio.lowlevel.checkpoint()  # let the exits that arrive together queue up
        batch, self._settling = self._settling, []
        events: list[m.Event] = []
        try:
            # Each job's replies and its settled mark in one transaction: all or nothing
            # (and one fsync for the whole batch).
            with self.outbox:
                for st in batch:
                    n = self.fanout.fan_out(st.job, st.outcome, st.content, st.ending.fields())
                    self.outbox.mark_settled(st.session, str(st.outcome))
                    mail = decode_agent_job(st.job).mail
                    events.append(
                        m.JobSettled(
                            session=st.session,
                            handle=st.handle,
                            key=mail.key if mail else "",
                            outcome=str(st.outcome),
                            replies=n,
                            recovered=st.recovered,
                            reason=st.ending.reason,
                        )
                    )
        except Exception:  # noqa: BLE001 - still running in the outbox: settled next start
            self.log.exception("settling jobs failed", sessions=[st.session for st in batch])
        finally:
            if events:
                await self.committer.record(*events)
            for st in batch:
                st.done.set()


def outcome_of(
    cancelled: bool, deadline: bool, killed_by: str | None, exit_code: int | None
) -> tuple[Outcome, str | None]:
    """A session's job outcome and its reason (bench_wire.outcomes), first match wins:
    a cancel, its deadline, `bench kill` (by the daemon stopping: daemon-stopped), a
    clean exit, then the child's own failure."""
    if cancelled:
        return Outcome.CANCELLED, None
    if deadline:
        return Outcome.INTERRUPTED, "deadline"
    if killed_by == "benchd":
        return Outcome.INTERRUPTED, "daemon-stopped"
    if killed_by is not None:
        return Outcome.INTERRUPTED, "killed"
    if exit_code == 0:
        return Outcome.COMPLETED, None
    return Outcome.FAILED, "exit-code" if exit_code is not None else "signal"


def ending_of(
    exit_code: int | None, sig: int | None, killed_by: str | None, reason: str | None = None
) -> Ending:
    """How a job's session ended, from its exit status and who killed it."""
    name = None if sig is None else _signal_name(sig)
    if killed_by is not None:
        return Ending("killed", exit_code, name, killed_by, reason)
    if exit_code is not None:
        return Ending("exited", exit_code, name, reason=reason)
    return Ending("signalled", None, name, reason=reason)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def ending_sentence(session: str, handle: str, ending: Ending) -> str:
    """The body of a reply when the job reported nothing: what happened, and where to
    look."""
    if ending.reason == "deadline" and ending.ended == "daemon-stopped":
        return (
            f"The job reported nothing: its deadline passed while the daemon was down; "
            f"session {session} ({handle}) had stopped with the previous daemon, and its "
            "scrollback is gone.\n"
        )
    if ending.ended == "daemon-stopped":
        return (
            f"The job reported nothing: the daemon stopped while session {session} "
            f"({handle}) was running, so how it ended is unknown and its scrollback is "
            "gone.\n"
        )
    if ending.reason == "deadline":
        how = f"was ended at its deadline ({ending.signal or 'it exited'})"
    elif ending.ended == "killed":
        how = f"was killed by {ending.killed_by}"
    elif ending.exit_code is not None:
        how = f"exited with code {ending.exit_code}"
    else:
        how = f"was ended by {ending.signal}"
    return (
        f"The job reported nothing: session {session} ({handle}) {how}. "
        f"Its scrollback: bench tail {session}\n"
    )
