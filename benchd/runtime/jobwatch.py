"""A job's clock: its deadline, and the stall of a child that shows no output
(docs/jobs.md, "Deadlines and stalls"). One task per live job session, in the session's
own nursery, so it ends with the session. Stall mail is a send like any other: the
child's limits apply.
"""

import math
from collections.abc import Awaitable, Callable

import trio

from bench_wire import messages as m
from bench_wire.config import seconds_text
from bench_wire.errors import WireError
from bench_wire.untrusted import escape
from benchd.core.authority import Caller
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.core.sends import Queue
from benchd.runtime.jobhost import child_mail
from benchd.runtime.limiter import Limiter
from benchd.runtime.mailroom import SUBJECT_CHARS, Mailroom
from benchd.runtime.outbound import Outbound
from benchd.runtime.roster import Session
from benchd.runtime.system import Log
from benchd.store.outbox import JobFiles

SCREEN_LINES = 10  # the last screen lines a stall mail quotes
MIN_STALL = 1.0  # the shortest stall time a spawn may ask for, in seconds (0: never)


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
