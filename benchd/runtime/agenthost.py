"""The agents' own reports (`bench hook EVENT`), their states, doors and approvals
(docs/agents.md). A connection already knows its session (benchd.runtime.placement), so
a session reports only about itself; reports are rate-bounded per session
(--agent-reports), and nothing in one is typed anywhere; what is shown is escaped.
"""

import datetime
import json
import re
import time
from collections.abc import Awaitable, Callable

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.untrusted import escape
from benchd.core import agentstate
from benchd.core.agentstate import AgentState, BadReport
from benchd.core.authority import Caller
from benchd.core.limits import Floods
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.runtime.adapters import DIALOG_KEYS, LIMIT_DIALOG, TURN_SCREEN, TurnScreen
from benchd.runtime.jobhost import JobWatch
from benchd.runtime.mailroom import SUBJECT_CHARS
from benchd.runtime.reactor import Reactor
from benchd.runtime.roster import Approval, Session
from benchd.runtime.system import Log

PAYLOAD_CHARS = 256 * 1024  # of a hook's JSON read (the fast path sends no more)
SCREEN_WATCH_S = 10.0  # how long the screen is watched for a limit's reset time
TURN_OVER_S = 2.0  # a turn over by the screen (no report) for this long ends it
TURN_READ_S = 0.25  # at most four screen reads a second while watching a turn
BURST_SECONDS = 10  # the report bucket holds this many seconds' worth of reports
# Claude Code's limit line: "You've hit your session limit · resets 1:42pm (UTC)".
RESETS_RE = re.compile(r"resets (\d{1,2})(?::(\d\d))?\s*([ap]m)\s*\(([^)]+)\)", re.IGNORECASE)


class AgentHost:
    def __init__(
        self,
        reactor: Reactor,
        watch: JobWatch,
        record: Callable[[m.Event], Awaitable[bool]],
        log: Log,
        approval_wait: float,
        reports_per_s: int,
        wall: WallClock = SYSTEM_WALL,
        floods: Floods | None = None,
    ) -> None:
        self.reactor = reactor
        self.watch = watch  # mail to a job's parent goes as the job's own (JobWatch.send_as)
        self.record = record
        self.log = log
        self.approval_wait = approval_wait
        self.reports_per_s = reports_per_s
        self.wall = wall
        self.floods = Floods() if floods is None else floods  # the daemon's one
        self.watching: set[str] = set()  # sessions whose turn the screen is watched for

    # ------------------------------------------------------------ reports

    async def report(self, caller: Caller, event: str, payload_text: str) -> m.AgentReportOk:
        s = caller.session
        if s is None:
            raise WireError(
                "forbidden", "only a session's own agent reports (bench hook), not the operator"
            )
        assert isinstance(s, Session), "a caller's session is the roster's"
        if not s.take_report(self.reports_per_s, BURST_SECONDS, trio.current_time()):
            # Logged as every refusal is: one line per flood and session, with a count.
            count = self.floods.count(("agent/report-limited", s.id), trio.current_time())
            if count:
                await self.record(
                    m.AgentReportLimited(
                        session=s.id, handle=s.handle, limit=self.reports_per_s, count=count
                    )
                )
            raise WireError(
                "rate-limited",
                f"more than {self.reports_per_s} hook reports a second from {s.handle}: "
                "this one was not taken (--agent-reports)",
            )
        if len(payload_text) > PAYLOAD_CHARS:
            payload_text = ""  # too big to read: the event alone still says what happened
        try:
            payload = agentstate.payload_of(payload_text)
            now = self.wall.wall_ms()
            new = agentstate.step(s.agent, event, payload, now)
        except BadReport as err:
            raise WireError("bad-request", str(err)) from None
        if event == "stop" and new.state == "idle":
            line = await self.reactor.hand_over(s)
            if line is not None:
                # Handed over: the turn goes on with the wake's line, the agent stays busy.
                await self._set(s, AgentState("working", now))
                out = json.dumps({"decision": "block", "reason": line}, ensure_ascii=False)
                return m.AgentReportOk(state="working", output=out)
        if event == "permission":
            return await self._blocked(s, new)
        if event == "tool" and s.mid_turn:
            # The mid-turn door: the wake's line as context added after the tool's result.
            await self._set(s, new)
            line = await self.reactor.hand_over(s, door="tool-hook")
            if line is None:
                return m.AgentReportOk(state=new.state)
            added = {"hookEventName": "PostToolUse", "additionalContext": line}
            text = json.dumps({"hookSpecificOutput": added}, ensure_ascii=False)
            return m.AgentReportOk(state=new.state, output=text)
        before = s.agent
        await self._set(s, new)
        marks = TURN_SCREEN.get(s.adapter or "")
        if event == "prompt" and marks is not None and s.id not in self.watching:
            self.watching.add(s.id)
            self.reactor.nursery.start_soon(self._watch_turn, s, marks)
        if new.state == "limited" and (before is None or before.state != "limited"):
            # What the agent draws next: its reset time if the report gave none, its
            # limit dialog; the parent's one mail goes once that is read (or not).
            self.reactor.nursery.start_soon(self._limit_screen, s, new)
        return m.AgentReportOk(state=new.state)

    async def _set(self, s: Session, new: AgentState) -> None:
        old = s.agent
        s.set_agent(new)
        if new.state != "limited":
            s.show_screen(None)
        if old is not None and (old.state, old.tool, old.until) == (new.state, new.tool, new.until):
            return
        await self.record(
            m.AgentStateChanged(
                session=s.id,
                handle=s.handle,
                state=new.state,
                tool=new.tool,
                input=new.input,
                until=new.until,
                source=new.source,
            )
        )

    # ------------------------------------------------------------ approvals

    async def _blocked(self, s: Session, new: AgentState) -> m.AgentReportOk:
        """The agent waits for an approval: show it, mail the parent, wait for the answer."""
        approval = Approval(new.tool)
        s.wait_approval(approval)
        await self._set(s, new)
        await self._tell_parent(s, _blocked_text(s, new))
        with trio.move_on_after(self.approval_wait):
            await approval.answered.wait()
        if not approval.answered.is_set():
            # Nobody answered in time: the agent's own dialog asks; an answer given
            # later is typed into it (its keys).
            approval.keys = True
            await self.record(
                m.AgentAnswered(
                    session=s.id,
                    handle=s.handle,
                    allow=False,
                    by="timeout",
                    via="hook",
                    tool=new.tool,
                    reason="no answer within --approval-wait: the agent's dialog asks",
                )
            )
            return m.AgentReportOk(state="blocked")
        decision: dict[str, object] = {"behavior": "allow" if approval.allow else "deny"}
        if not approval.allow:
            decision["message"] = approval.reason or f"denied by {approval.by} through bench"
        out = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
        return m.AgentReportOk(state="working", output=json.dumps(out, ensure_ascii=False))

    async def answer(
        self, caller: Caller, s: Session, allow: bool, reason: str | None
    ) -> m.AgentAnswerOk:
        """`bench approve|deny`: through the waiting hook, else the dialog's keys."""
        approval = s.approval
        a = s.agent
        if approval is None or a is None or a.state != "blocked" or approval.answered.is_set():
            raise WireError(
                "not-blocked",
                f"{s.handle} is not waiting for an approval"
                + (f" (its agent is {a.state})" if a is not None else ""),
            )
        via = "hook"
        if approval.keys:
            keys = DIALOG_KEYS.get(s.adapter or "")
            if keys is None or s.term is None:
                raise WireError(
                    "not-blocked",
                    f"{s.handle}'s approval hook has stopped waiting and bench knows no "
                    "keys for its dialog: answer it in the session (bench attach)",
                )
            async with s.write_lock:
                await s.term.write(keys[0] if allow else keys[1])
            via = "keys"
        approval.decide(allow, reason, caller.handle)
        s.wait_approval(None)
        await self.record(
            m.AgentAnswered(
                session=s.id,
                handle=s.handle,
                allow=allow,
                by=caller.handle,
                via=via,
                tool=approval.tool,
                reason=reason,
            )
        )
        await self._set(s, agentstate.answered(a, self.wall.wall_ms()))
        return m.AgentAnswerOk(session=s.id, handle=s.handle, tool=approval.tool, via=via)

    # ------------------------------------------------------------ the parent

    async def _tell_parent(self, s: Session, text: tuple[str, str]) -> None:
        """One mail to a job's parent session (sent as the job, its limits apply)."""
        to = s.parent_handle
        if s.parent is None or to is None:
            return  # the operator's own session: `bench ps` and the events show it
        subject, body = text
        try:
            await self.watch.send_as(Caller(s.handle, s), to, body, subject)
        except WireError as err:
            self.log.warning("agent mail refused", session=s.id, to=to, code=err.code)

    async def _watch_turn(self, s: Session, marks: TurnScreen) -> None:
        """While the agent works by its report: a turn the screen shows over for
        TURN_OVER_S with no report makes it idle, or limited (screen evidence)."""
        term = s.term
        over_since: float | None = None
        try:
            while term is not None and not term.eof:
                a = s.agent
                if a is None or a.state not in ("working", "blocked"):
                    return
                changed = term.changed
                text = await term.screen_text()
                now = trio.current_time()
                if a.state == "working" and marks.busy not in text and marks.ready.search(text):
                    over_since = now if over_since is None else over_since
                    if now - over_since >= TURN_OVER_S:
                        await self._turn_over(s, a, marks, text)
                        return
                else:
                    over_since = None
                with trio.move_on_after(TURN_OVER_S):
                    await changed.wait()
                await trio.sleep(TURN_READ_S)
        finally:
            self.watching.discard(s.id)

    async def _turn_over(self, s: Session, a: AgentState, marks: TurnScreen, text: str) -> None:
        now = self.wall.wall_ms()
        if not marks.limit.search(text):
            await self._set(s, AgentState("idle", now, source="screen"))
            return
        until = local_reset(marks.reset.search(text), now)
        limited = AgentState("limited", now, until=until, source="screen")
        await self._set(s, limited)
        s.show_screen("limit")
        await self._tell_parent(s, _limited_text(s, limited))

    async def _limit_screen(self, s: Session, limited: AgentState) -> None:
        """Watch the screen (at most SCREEN_WATCH_S) after a usage limit: its reset time,
        when the report gave none, becomes `until` (screen evidence); a limit dialog is
        answered "wait for the reset" (the wake typed after it needs the input box)."""
        term = s.term
        until = limited.until
        dialog = LIMIT_DIALOG.get(s.adapter or "")
        with trio.move_on_after(SCREEN_WATCH_S):
            while term is not None and not term.eof and s.agent is not None:
                if s.agent.state != "limited":
                    break
                changed = term.changed
                text = await term.screen_text()
                if until is None:
                    until = reset_from_screen(text, self.wall.wall_ms())
                    if until is not None:
                        s.show_screen("limit")
                        await self._set(s, AgentState("limited", limited.since, until=until))
                if dialog is not None and dialog[0] in text:
                    async with s.write_lock:
                        await term.write(dialog[1])
                    dialog = None
                if until is not None and dialog is None:
                    break
                await changed.wait()
        a = s.agent
        await self._tell_parent(s, _limited_text(s, a if a is not None else limited))


def reset_from_screen(screen: str, now_ms: int) -> int | None:
    """`resets 1:42pm (UTC)` as the next such time after now, in wall ms (UTC only:
    another zone's name is not trusted to be read right, so it gives None)."""
    found = RESETS_RE.search(screen)
    if found is None:
        return None
    hour, minute, half, zone = found.groups()
    if zone.strip().upper() not in ("UTC", "GMT", "ETC/UTC"):
        return None
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    day = now_ms - now_ms % 86_400_000
    at = day + (h * 60 + int(minute or 0)) * 60_000
    return at if at > now_ms else at + 86_400_000


def local_reset(found: re.Match[str] | None, now_ms: int) -> int | None:
    """`try again at 5:22 PM` (the daemon's local time, as the agent on this machine
    shows it) as wall ms: the end of that minute (the reset falls somewhere in it), the
    next such time after now."""
    if found is None:
        return None
    hour, minute, half = found.groups()
    h = int(hour) % 12 + (12 if half.upper() == "PM" else 0)
    if int(minute) > 59:
        return None
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    at = now.replace(hour=h, minute=int(minute), second=0, microsecond=0)
    at += datetime.timedelta(minutes=1)
    if at < now - datetime.timedelta(hours=1):
        at += datetime.timedelta(days=1)  # an hour or more "ago": tomorrow's (a message
        # read minutes late still means that minute, already past)
    return int(at.timestamp() * 1000)


def _when(ms: int | None) -> str:
    if ms is None:
        return "an unknown time (until it reports work again)"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))


def _blocked_text(s: Session, a: AgentState) -> tuple[str, str]:
    tool = escape(a.tool or "?")
    return (
        f"{s.handle} waits for an approval: {tool}"[:SUBJECT_CHARS],
        f"{s.handle} (session {s.id}) waits for your approval to run {tool} with:\n\n"
        f"    {escape(a.input or '')}\n\n"
        f"Answer: bench approve {s.handle} · bench deny {s.handle} -m REASON\n",
    )


def _limited_text(s: Session, a: AgentState) -> tuple[str, str]:
    return (
        f"{s.handle} hit a usage limit"[:SUBJECT_CHARS],
        f"{s.handle} (session {s.id}) hit its usage limit; it resets at {_when(a.until)}. "
        "Mail to it is parked until then, and delivered once it is back.\n",
    )
