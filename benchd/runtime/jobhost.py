"""Jobs wired into the daemon, on the mailroom's own parts (docs/jobs.md, "The outbox's
guarantees"): a `JobOp` commits one change of a job's record with the keyed sends it
makes, so a reply is delivered in the very journal record that says it was. `JobWatch`
is a job's clock (docs/jobs.md, "Deadlines and stalls"): one task per live job session,
in the session's own nursery, so it ends with the session.
"""

import itertools
import math
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.addresses import resolve
from bench_wire.config import seconds_text
from bench_wire.errors import WireError
from bench_wire.untrusted import escape
from benchd.core import jobs
from benchd.core.authority import Caller, CallerSession
from benchd.core.jobs import Job, JobRecord, Outcome
from benchd.core.keys import check_client_key
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.core.sends import Queue, Send
from benchd.runtime.committer import Batch, Committer, Op, fail, settle
from benchd.runtime.limiter import Limiter
from benchd.runtime.mailroom import SUBJECT_CHARS, Mailroom, SendOp
from benchd.runtime.outbound import Outbound
from benchd.runtime.roster import Session
from benchd.runtime.system import Log
from benchd.store.fileio import faults, write_all
from benchd.store.index import Index
from benchd.store.journal import Rename, Write
from benchd.store.outbox import JobFiles, encode

PAGE = 64  # replies sent per JobOp, and so per batch of a drain
SCREEN_LINES = 10  # the last screen lines a stall mail quotes
MIN_STALL = 1.0  # the shortest stall time a spawn may ask for, in seconds (0: never)


@dataclass(frozen=True, slots=True)
class Ending:
    """How a job's session ended: the reply header fields documented in docs/jobs.md."""

    ended: Literal["exited", "signalled", "killed", "daemon-stopped"]
    exit_code: int | None = None
    signal: str | None = None  # the signal's name (SIGTERM), as the header says it
    killed_by: str | None = None
    reason: str | None = None  # the outcome's reason (bench_wire.messages.OUTCOMES), if it has one

    def fields(self) -> dict[str, str | int]:
        named = (
            ("reason", self.reason),
            ("ended", self.ended),
            ("exitCode", self.exit_code),
            ("signal", self.signal),
            ("killedBy", self.killed_by),
        )
        return {name: value for name, value in named if value is not None}


Change = Callable[[JobRecord | None], JobRecord]


class JobOp(Op[JobRecord]):
    """One change of a job's record, with the sends it makes (at most `limit` replies;
    `task`: the spawn's task mail, without which no record is made), committed as one.
    The change is applied to the record as the batch's earlier ops left it, so a report
    and a settlement in one batch both count."""

    def __init__(
        self,
        host: "JobHost",
        session: str,
        change: Change,
        *,
        limit: int = PAGE,
        task: SendOp | None = None,
        events: Callable[[JobRecord], list[m.Event]] = lambda record: [],
    ) -> None:
        super().__init__()
        self.host, self.session, self.change = host, session, change
        self.limit, self.task, self.make_events = limit, task, events
        self.sends: list[SendOp] = []
        self.answers: dict[SendOp, Callable[[], m.SendOk]] = {}  # sends with nothing to write
        self.record: JobRecord | None = None
        self.tmp: str | None = None

    def _try(self, op: SendOp, batch: Batch) -> bool:
        """Check and stage one send as the committer would; False: it was refused."""
        try:
            answer = op.check(self.host.committer)
            if answer is None:
                op.prepare(batch)
            else:
                self.answers[op] = answer
            return True
        except Exception as err:  # noqa: BLE001 - its refusal, said in the op's error
            fail(op, err)
            return False

    def prepare(self, batch: Batch) -> None:
        host, files = self.host, self.host.files
        record = self.change(host.job(self.session))
        if self.task is not None:
            if not self._try(self.task, batch):
                assert self.task.error is not None, "a refused send has its error"
                raise self.task.error
            answer = self.answers.get(self.task)
            sent = self.task.result if answer is None else answer()
            record = msgspec.structs.replace(record, task_id=sent.mail_id)
        now = host.wall.wall_ms()
        events: list[m.Event] = []
        accepted: dict[int, bool] = {}
        for reply in jobs.due(record, now)[: self.limit]:
            key = record.reply_key(reply)
            try:
                op = host.reply_op(record, reply)
            except (WireError, OSError) as err:
                events.append(_retry(key, reply.to, err))
                accepted[reply.index] = False
                continue
            ok = self._try(op, batch)
            answer = self.answers.get(op)
            if ok and answer is not None and (op.spec.sender, op.spec.key) not in batch.keys:
                # Delivered before (a record written again from an older state): the
                # mailroom knew the key, and wrote nothing.
                events.append(m.OutboxPosted(key=key, to=reply.to, mail_id=answer().mail_id))
            elif not ok:
                assert op.error is not None, "a refused send has its error"
                events.append(_retry(key, reply.to, op.error))
            accepted[reply.index] = ok
            self.sends.append(op)
        record = jobs.attempted(record, accepted, now, host.retry_base_ms)
        data = encode(record)
        # Its own name: two changes of one job may be staged in one batch.
        self.tmp = files.path("tmp", f"{self.session}.{next(host.staged_names)}")
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        opened, done = files.path("open", self.session), files.path("done", self.session)
        staged = [op for op in self._ops() if op.error is None]
        self.entries = [e for op in staged for e in op.entries] + [Write(opened, data, done)]
        if not record.owing:
            self.entries.append(Rename(opened, done))
        self.events = [*self.make_events(record), *(e for op in staged for e in op.events)]
        self.events += events
        self.record = files.staged[self.session] = record

    def _ops(self) -> list[SendOp]:
        return [op for op in [self.task, *self.sends] if op is not None]

    def place(self) -> None:
        assert self.record is not None and self.tmp is not None, "prepare() staged it"
        files = self.host.files
        files.remember(self.record)
        if files.staged.get(self.session) is self.record:
            del files.staged[self.session]
        self.result = self.record
        for op in self._ops():
            if op.error is None and op not in self.answers:
                op.place()
        opened = files.path("open", self.session)
        os.rename(self.tmp, opened)
        self.tmp = None
        if not self.record.owing:
            os.rename(opened, files.path("done", self.session))

    def index(self, idx: Index) -> None:
        for op in self._ops():
            if op.error is None and op not in self.answers:
                op.index(idx)

    def discard(self) -> None:
        staged = self.host.files.staged
        if self.record is not None and staged.get(self.session) is self.record:
            del staged[self.session]
        for op in self._ops():
            op.discard()
        if self.tmp is not None and os.path.exists(self.tmp):
            os.unlink(self.tmp)

    def finish(self) -> None:
        for op, answer in self.answers.items():
            settle(op, answer)
        if self.error is None and self.host.outbound is not None:
            for op in self._ops():
                if isinstance(op.spec, Queue) and op.error is None:
                    self.host.outbound.queued_as(op, op.result)  # the bridge is told


def _retry(key: str, to: str, err: Exception) -> m.OutboxRetry:
    if isinstance(err, WireError):
        return m.OutboxRetry(key=key, to=to, reason=err.message, code=err.code)
    return m.OutboxRetry(key=key, to=to, reason=str(err))


class JobHost:
    def __init__(
        self,
        files: JobFiles,
        mailroom: Mailroom,
        committer: Committer,
        index: Index,
        body_bytes: int,
        retry_base: float,
        log: Log,
        wall: WallClock = SYSTEM_WALL,
        outbound: Outbound | None = None,
    ) -> None:
        self.files = files
        self.mailroom = mailroom
        self.committer = committer
        self.index = index
        self.body_bytes = body_bytes
        self.log = log
        # Wall-clock ms: the replies' due times are stored in the records and read back
        # by the next daemon, so a monotonic reading would mean nothing to it.
        self.wall = wall
        self.retry_base_ms = max(1, int(retry_base * 1000))
        self.outbound = outbound  # replies to handle@node go there
        self._wake_at = math.inf
        self._poke = trio.Event()
        self._drain_lock = trio.Lock()  # one drain at a time; stop() waits for it
        self._stopping = False
        self.staged_names = itertools.count()  # a JobOp stages its record under one

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._start()
        task_status.started()
        await self._timer()

    async def _start(self) -> None:
        for where, why in self.files.bad:  # left as it is, and said; the others settle
            self.log.error("a stored job does not load", session=where, error=why)
        # Jobs whose sessions died with the previous daemon: interrupted (by their
        # deadline when it has passed by now).
        now = self.wall.wall_ms()
        deadlines: list[m.Event] = []
        ops: list[JobOp] = []
        for record in list(self.files.open.values()):
            if not record.running:
                continue
            job = record.job
            past = job.deadline_ms is not None and job.deadline_ms <= now
            ending = Ending("daemon-stopped", reason="deadline" if past else "daemon-stopped")
            if past:
                deadlines.append(
                    m.JobDeadline(
                        session=job.session,
                        handle=job.handle,
                        key=job.key,
                        deadline_ms=job.deadline_ms or 0,
                        recovered=True,
                    )
                )
            content = record.content or ending_sentence(job.session, job.handle, ending)
            ops.append(self.settle_op(job, Outcome.INTERRUPTED, content, ending, True))
        if deadlines:
            await self.committer.record(*deadlines)
        for op in ops:
            self.committer.enqueue(op)
        for op in ops:
            try:
                self._owed(await op.wait())
            except WireError as err:  # still running on disk: settled at the next start
                self.log.error("settling a job failed", session=op.session, error=err.message)
        self._schedule_wake(self.wall.wall_ms())

    def _owed(self, record: JobRecord) -> None:
        for r in record.replies:
            if not r.delivered:
                self._schedule_wake(r.due)

    def _schedule_wake(self, at_ms: float) -> None:
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
                    await self._drain()
                except Exception:  # noqa: BLE001 - never the daemon's end; tried again
                    self.log.exception("sending the replies owed failed; again in 5 s")
                    self._schedule_wake(self.wall.wall_ms() + 5000)

    async def _drain(self) -> bool:
        """Send one page of the replies due, in one batch; True when more was due."""
        now = self.wall.wall_ms()
        page: list[JobOp] = []
        room, earliest = PAGE, math.inf
        for session, record in sorted(self.files.open.items(), key=lambda kv: kv[1].job.key):
            owed = [r for r in record.replies if not r.delivered]
            ready = [r for r in owed if r.due <= now]
            later = [r.due for r in owed if r.due > now]
            earliest = min([earliest, *later])
            if ready and room <= 0:
                earliest = now  # more than a page was due: at once, on a fresh wake
                continue
            if ready:
                page.append(JobOp(self, session, _same, limit=min(room, len(ready))))
                room -= len(ready)
        try:
            for op in page:
                self.committer.enqueue(op)
        except WireError:  # stopping: what is owed is drained at the next start
            return False
        for op in page:
            try:
                await op.wait()
            except WireError as err:  # e.g. the disk is full: the record is unchanged
                self.log.warning(
                    "a job's replies were not sent", session=op.session, error=err.message
                )
                earliest = min(earliest, now + 5000)
        for op in page:
            for r in op.record.replies if op.record is not None else ():
                if not r.delivered:
                    earliest = min(earliest, r.due)
        self._schedule_wake(earliest)
        return earliest <= now

    async def stop(self) -> None:
        self._stopping = True
        async with self._drain_lock:
            for _ in range(64):  # bounded: replies left over are drained at next start
                if not await self._drain():
                    break

    def reply_op(self, record: JobRecord, reply: jobs.Reply) -> SendOp:
        job = record.job
        assert record.outcome is not None, "only a settled job replies"
        subject = jobs.reply_subject(record.subject, job.key, record.outcome)
        faults.check("post")
        send = child_mail(
            self.mailroom,
            self.outbound,
            job.handle,
            reply.to,
            record.body,
            subject,
            key=record.reply_key(reply),
            in_reply_to=record.task_id,
            outbox_reply=True,  # outbox/posted in the same commit
        )
        return SendOp(self.mailroom, send)

    def job(self, session: str) -> JobRecord | None:
        return self.files.staged.get(session) or self.files.job(session)

    def check_spec(self, spec: m.JobMailSpec, caller: Caller) -> None:
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
        if self.files.has_key(spec.key) or self.index.find_key(caller.handle, spec.key):
            raise WireError(
                "key-used",
                f"the key {spec.key!r} already names another job or "
                "message; a new job needs a new key",
            )

    def begin(self, s: "Session", spec: m.JobMailSpec, caller: Caller) -> None:
        s.begin_job(
            Job(
                session=s.id,
                handle=s.handle,
                key=spec.key or f"job-{s.id}",
                sender=caller.handle,
                reply_to=tuple(spec.reply_to),
                deadline_ms=s.deadline_ms,
            )
        )

    def abandon(self, s: "Session") -> None:
        if s.job is not None and self.job(s.id) is not None:
            op = self.settle_op(s.job, Outcome.ABANDONED, "", None, False, event=False)
            try:
                self.committer.enqueue(op)
            except WireError:
                pass  # stopping: the next start settles it (interrupted)

    async def deliver_task(self, s: "Session", spec: m.JobMailSpec, caller: Caller) -> str:
        """The task mail, committed with the job's record: no job without its task."""
        job = s.job
        assert job is not None, "begin() made the job"
        subject = spec.subject or "task"
        task = SendOp(
            self.mailroom,
            self.mailroom.check_send(
                caller.handle,
                s.handle,
                spec.body,
                subject,
                key=job.key,
                reply_to=list(spec.reply_to),
            ),
        )
        self.files.keys.setdefault(job.key, s.id)  # taken while it commits
        try:
            await self.committer.submit(
                JobOp(self, s.id, lambda _: JobRecord(job=job, subject=subject), task=task)
            )
        finally:
            if self.files.open.get(s.id) is None and self.files.keys.get(job.key) == s.id:
                del self.files.keys[job.key]
        return task.result.mail_id

    async def report(self, caller: Caller, content: str) -> int:
        s = caller.session
        if s is None:
            raise WireError("not-in-session", "bench report works only inside a bench session")
        if s.job is None:
            raise WireError("no-job", f"session {s.handle} is not running a job")
        data = content.encode("utf-8", "surrogatepass")
        if len(data) > self.body_bytes - 512:
            raise WireError("body-too-large", "the report is larger than the body cap")

        await self.committer.submit(self.report_op(s, content, len(data)))
        if isinstance(s, Session):  # the roster's, as every caller's session in the daemon
            s.mark_reported()
        return len(data)

    def report_op(self, s: CallerSession, content: str, size: int) -> JobOp:

        def reported(record: JobRecord | None) -> JobRecord:
            if record is None or not record.running:
                raise WireError("no-job", f"the job of {s.handle} has already settled")
            return msgspec.structs.replace(record, content=content)

        def events(_record: JobRecord) -> list[m.Event]:
            return [m.JobReported(session=s.id, handle=s.handle, bytes=size)]

        return JobOp(self, s.id, reported, limit=0, events=events)

    async def settle(self, s: "Session") -> None:
        """Settle the job of a session that ended, and say how on the session."""
        assert s.job is not None, "only a job's session is settled here"
        outcome, reason = outcome_of(s.cancelled, s.deadline_hit, s.killed_by, s.exit)
        ending = ending_of(s.exit, s.signal, s.killed_by, reason)
        op = self.settle_op(s.job, outcome, "", ending, False)
        try:
            self._owed(await self.committer.submit(op))
        except WireError as err:  # still running on disk: settled at the next start
            self.log.error("settling a job failed", session=s.id, error=err.message)
        s.job_settled(str(outcome), reason)

    def settle_op(
        self,
        job: Job,
        outcome: Outcome,
        content: str,
        ending: Ending | None,
        recovered: bool,
        *,
        event: bool = True,
    ) -> JobOp:
        """`content`: what the replies say, else the last report, else how it ended."""
        now = self.wall.wall_ms()
        details = ending.fields() if ending is not None else {}
        again = False

        def settled(record: JobRecord | None) -> JobRecord:
            nonlocal again
            record = record or JobRecord(job=job)
            if not record.running:
                again = True
                return record  # settled already: a settlement is never made twice
            said = content or record.content
            if not said and ending is not None:
                said = ending_sentence(job.session, job.handle, ending)
            return jobs.settle(record, outcome, said, details, now)

        def events(record: JobRecord) -> list[m.Event]:
            if not event or again:
                return []
            return [
                m.JobSettled(
                    session=job.session,
                    handle=job.handle,
                    key=job.key,
                    outcome=str(outcome),
                    replies=len(record.replies),
                    recovered=recovered,
                    reason=ending.reason if ending is not None else None,
                )
            ]

        return JobOp(self, job.session, settled, events=events)


def child_mail(
    mailroom: Mailroom,
    outbound: Outbound | None,
    sender: str,
    to: str,
    body: str,
    subject: str,
    *,
    key: str | None = None,
    in_reply_to: str | None = None,
    outbox_reply: bool = False,
) -> Send:
    """Mail from a job's child to one of its reply-to addresses (a reply, a stall mail),
    checked: local mail in reply to the task, or queued for another node, where its
    thread starts (the task's id is this node's)."""
    own = outbound.node if outbound is not None else None
    handle, node = resolve(to, own, None, "reply-to")
    if node is None:
        return mailroom.check_send(
            sender, handle, body, subject, key, None, in_reply_to, outbox_reply=outbox_reply
        )
    assert outbound is not None, "the daemon builds it with the outbound queue"
    return outbound.queue_spec(sender, to, body, subject, key, outbox_reply=outbox_reply)


def _same(record: JobRecord | None) -> JobRecord:
    if record is None or not record.owing:
        raise WireError("no-job", "the job's replies were all delivered")
    return record


def outcome_of(
    cancelled: bool, deadline: bool, killed_by: str | None, exit_code: int | None
) -> tuple[Outcome, str | None]:
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


def _duration_text(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


class JobWatch:
    def __init__(
        self,
        record: Callable[..., Awaitable[bool]],
        mailroom: Mailroom,
        limiter: Limiter,
        jobs: JobFiles,
        end: Callable[["Session"], Awaitable[None]],
        log: Log,
        stall_after: float,
        max_deadline: float,
        wall: WallClock = SYSTEM_WALL,
        outbound: Outbound | None = None,
    ) -> None:
        self.record = record  # the committer's: logs events
        self.mailroom = mailroom
        self.limiter = limiter
        self.jobs = jobs  # the job records: a stall mail is in its task's thread
        self.end = end  # sessions.end_session: HUP, TERM, KILL, a grace apart
        self.log = log
        self.stall_after = stall_after  # the daemon's default; 0: never
        self.max_deadline = max_deadline
        self.wall = wall  # a deadline's time, stored with the job
        self.outbound = outbound  # stall mail to handle@node goes there

    # ------------------------------------------------------------ at spawn

    def _check(self, value: float | None, flag: str, stall: bool) -> float | None:
        """A deadline is more than 0; a stall time 0 (never) or at least MIN_STALL (a
        spawner cannot turn its child's blinking into a stream of mail); both at most
        --max-deadline."""
        if value is None:
            return None
        low_ok = (value == 0 or value >= MIN_STALL) if stall else value > 0
        if not (low_ok and math.isfinite(value)) or value > self.max_deadline:
            low = f"0 (never) or {seconds_text(MIN_STALL)}" if stall else "more than 0"
            raise WireError(
                "bad-duration",
                f"{flag} {seconds_text(value)} is out of range: give {low} up to the "
                f"daemon's --max-deadline ({seconds_text(self.max_deadline)})",
            )
        return value

    def prepare(self, s: "Session", req: m.Spawn) -> None:
        """Check a spawn's deadline and stall time and set them on its session (before
        the job is made: the job stores its deadline)."""
        deadline = self._check(req.deadline, "--deadline", stall=False)
        stall = self._check(req.stall_after, "--stall-after", stall=True)
        at = None
        if deadline is not None:
            at = (trio.current_time() + deadline, self.wall.wall_ms() + int(deadline * 1000))
        s.watch_time(at, self.stall_after if stall is None else stall)

    # ------------------------------------------------------------ while it runs

    async def run_session(self, s: "Session") -> None:
        async with trio.open_nursery() as nursery:
            if s.deadline_at is not None:
                nursery.start_soon(self._deadline, s)
            if s.job is not None and s.stall_after > 0:
                nursery.start_soon(self._stalls, s)

    async def _deadline(self, s: "Session") -> None:
        assert s.deadline_at is not None, "run_session starts this only with a deadline"
        await trio.sleep_until(s.deadline_at)
        if not s.live:
            return
        s.hit_deadline()
        key = s.job.key if s.job is not None else ""
        ms = s.deadline_ms or 0
        await self.record(m.JobDeadline(session=s.id, handle=s.handle, key=key, deadline_ms=ms))
        self.log.info("deadline passed: ending the session", session=s.id, handle=s.handle)
        await self.end(s)

    async def _stalls(self, s: "Session") -> None:
        term = s.term
        assert term is not None, "a launched session has its terminal"
        started = trio.current_time()  # the terminal's clock (its last_output)
        while not term.eof:  # at eof `changed` stays set: the session is ending anyway
            last = max(term.last_output or started, started)
            if s.stalled_at is None:
                now = trio.current_time()
                due = last + s.stall_after
                if s.reported:
                    return  # it has said what it has; its silence owes no mail
                if now < due:
                    with trio.move_on_after(due - now):
                        await term.changed.wait()
                    continue
                s.stalled(now)
                await self._stalled(s, now - last)
            else:
                # Output since the stall began (it may have come while the stall mail was
                # sent) ends it now; else the next output does.
                if (term.last_output or started) <= s.stalled_at:
                    await term.changed.wait()
                if term.eof:
                    return
                stalled_ms = int((trio.current_time() - s.stalled_at) * 1000)
                s.stalled(None)
                await self.record(m.JobActive(session=s.id, handle=s.handle, stalled_ms=stalled_ms))

    async def _stalled(self, s: "Session", idle: float) -> None:
        assert s.term is not None and s.job is not None, "a live job's session"
        text = await s.term.screen_text()
        shown = text.split("\n")[-SCREEN_LINES:] if text else []
        to = list(s.job.reply_to)
        task_id, subject = self.jobs.task_of(s.job.key)
        idle_text = _duration_text(idle)
        body = (
            f"{s.handle} (session {s.id}) has shown no output for {idle_text} and has not "
            f"reported (bench report).\n\nIts last {len(shown)} screen lines:\n\n"
            + "".join(f"    {escape(line)}\n" for line in shown)
            + f"\nLook: bench tail {s.handle} --screen · nudge: bench type {s.handle} TEXT"
            f" · end: bench kill {s.handle}\n"
        )
        title = f"Re: {subject}" if subject else f"job {s.handle}"
        suffix = f" (stalled: idle {idle_text})"
        title = title[: SUBJECT_CHARS - len(suffix)] + suffix
        mailed, refused = [], []
        for address in to:
            try:
                await self.send_as(Caller(s.handle, s), address, body, title, task_id)
                mailed.append(address)
            except WireError as err:
                refused.append(address)
                self.log.warning("stall mail refused", session=s.id, to=address, code=err.code)
        await self.record(
            m.JobStalled(
                session=s.id,
                handle=s.handle,
                idle_ms=int(idle * 1000),
                mailed=mailed,
                refused=refused,
            )
        )

    async def send_as(
        self, caller: Caller, to: str, body: str, subject: str, task_id: str | None = None
    ) -> None:
        """Mail from a session that no client asked for (a stall, an approval, a limit),
        charged as its send to its tree: its limits apply."""
        spec = child_mail(
            self.mailroom, self.outbound, caller.handle, to, body, subject, in_reply_to=task_id
        )
        size = len(spec.body)
        if isinstance(spec, Queue):
            assert self.outbound is not None, "child_mail queues only through it"
            self.limiter.charge(caller, 1, size)
            await self.outbound.send(spec)
            return
        self.limiter.mailbox(caller.handle, spec.to, size)
        self.limiter.charge(caller, 1, size, (spec.to,))
        await self.mailroom.send(spec)
