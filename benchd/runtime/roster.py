"""The sessions as the runtime sees them: a `Session` and the `Roster` that finds one.
Below everything that acts on sessions, importing none of them (no import circle).
"""

import collections
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Literal, overload

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.agentstate import AgentState, SessionState, advance
from benchd.core.authority import CallerSession
from benchd.core.jobs import Job
from benchd.core.limits import TokenBucket
from benchd.core.wakegate import Compiled
from benchd.runtime.past import PastSession, Record
from benchd.runtime.terminal import Terminal

_field = dataclasses.field


@dataclasses.dataclass(frozen=True, slots=True)
class Wake:
    """A wake the reactor queued on a session: a mail's (mail_id and sender set), or a
    digest of `digest` unread messages (neither set)."""

    mail_id: str | None
    sender: str | None
    digest: int = 0


@dataclasses.dataclass(slots=True, eq=False)
class Approval:
    """The approval an agent waits for: its PermissionRequest hook's connection waits on
    `answered` (at most --approval-wait), `bench approve|deny` decides."""

    tool: str | None
    keys: bool = False  # no hook waits: an answer is typed into the agent's dialog
    answered: trio.Event = _field(default_factory=trio.Event)
    allow: bool = False
    reason: str | None = None
    by: str | None = None

    def decide(self, allow: bool, reason: str | None, by: str) -> None:
        self.allow, self.reason, self.by = allow, reason, by
        self.answered.set()


@dataclasses.dataclass(eq=False)
class Session:
    """A session this daemon started (one read back from disk is a past.PastSession),
    built whole when it is reserved; changed after that only through its methods."""

    id: str
    handle: str
    token: str
    argv: list[str]  # as asked for: shown without an adapter's hooks
    term: Terminal | None = None
    ready: Compiled | None = None
    job: Job | None = None  # the jobs.Job of a job spawn
    # What launch() starts: argv, cwd, env, rows, cols.
    launch_args: tuple[list[str], str, dict[str, str], int, int] | None = None
    launch: m.Launch | None = None  # the spawn as asked for, as `bench restart` repeats it
    size: tuple[int, int] = (40, 120)  # its own size, restored when detached
    paste_settle: float | None = None  # a preset's, else the daemon's
    sandboxed: bool = False  # its program runs in a sandbox (benchd.runtime.sandbox)
    # An agent adapter (benchd.runtime.adapters), and whether it hands mail over after
    # tool calls too.
    adapter: str | None = None
    mid_turn: bool = False
    wakes: collections.deque[Wake] = _field(default_factory=collections.deque)
    last_input: float = 0.0  # trio's clock at the last operator keystroke
    write_lock: trio.Lock = _field(default_factory=trio.Lock)
    state: SessionState = SessionState.RUNNING
    exit: int | None = None
    signal: int | None = None
    exited: trio.Event = _field(default_factory=trio.Event)
    cancelled: bool = False
    killed_by: str | None = None  # who ran `bench kill` on it, if anyone
    attached: int = 0  # clients attached now
    _poke: trio.Event = _field(default_factory=trio.Event)
    # Delegation: the session that spawned it, and all its spawners' ids, nearest first
    # (benchd.core.trees).
    parent: str | None = None
    parent_handle: str | None = None
    lineage: tuple[str, ...] = ()
    root_handle: str | None = None  # the handle of its tree's root (a job's)
    outcome: str | None = None  # its job's, once settled
    reason: str | None = None  # and its reason (bench_wire.messages.OUTCOMES)
    # Deadline and stall (benchd.runtime.jobhost.JobWatch): when it is ended (wall ms, and
    # trio's time the watch sleeps until), whether the deadline ended it, its stall time
    # (0: never), since when it is stalled (trio's clock), and whether it has run
    # `bench report` (a child that reported owes no stall mail).
    deadline_ms: int | None = None
    deadline_at: float | None = None
    deadline_hit: bool = False
    stall_after: float = 0.0
    stalled_at: float | None = None
    reported: bool = False
    ns: int | None = None  # its sandbox's PID namespace (inode), once seen
    # What the agent's own hooks reported (None until the first report: the screen
    # decides until then), and what its screen shows beside it (evidence).
    agent: AgentState | None = None
    agent_screen: str | None = None
    agent_changed: trio.Event = _field(default_factory=trio.Event)  # replaced at each change
    approval: Approval | None = None  # the approval its agent waits for, if any
    reports: TokenBucket | None = None  # its hook reports' bucket (--agent-reports)

    def exited_with(self, code: int | None, sig: int | None) -> None:
        self.state = advance(self.state, SessionState.EXITED)
        self.exit, self.signal = code, sig
        self.wakes.clear()  # its queued wakes are dropped; the mail stays
        a = self.agent
        if a is not None and a.state != "exited":
            # Its process ended without the agent's own `end` report (killed, crashed):
            # its last report no longer holds.
            self.set_agent(AgentState("exited", a.since, source="process"))
        self.approval = None

    def started(self, term: Terminal) -> None:
        self.term = term

    def begin_job(self, job: Job) -> None:
        self.job = job

    def job_settled(self, outcome: str, reason: str | None) -> None:
        self.outcome, self.reason = outcome, reason

    def delegated_by(self, parent: CallerSession) -> None:
        """A job its spawner `parent` started (benchd.core.trees)."""
        self.parent, self.parent_handle = parent.id, parent.handle
        self.lineage = (parent.id, *parent.lineage)
        self.root_handle = getattr(parent, "root_handle", None) or parent.handle

    def mark_reported(self) -> None:
        self.reported = True

    def take_report(self, per_s: int, burst_s: int, now: float) -> bool:
        """Whether its hook report fits its bucket (per_s a second, burst_s seconds'
        worth at once)."""
        if self.reports is None:
            self.reports = TokenBucket(max(1, per_s * burst_s), 1.0 / max(1, per_s), now)
        return self.reports.take(now)

    def watch_time(self, deadline: tuple[float, int] | None, stall_after: float) -> None:
        """Its deadline (trio's time, wall ms) if any, and its stall time (0: never)."""
        if deadline is not None:
            self.deadline_at, self.deadline_ms = deadline
        self.stall_after = stall_after

    def hit_deadline(self) -> None:
        self.deadline_hit = True

    def stalled(self, since: float | None) -> None:
        """Stalled since `since`, or active again (None)."""
        self.stalled_at = since

    def show_screen(self, evidence: str | None) -> None:
        self.agent_screen = evidence

    def wait_approval(self, approval: Approval | None) -> None:
        self.approval = approval

    def withdraw(self) -> None:
        """Its job's task is withdrawn (its spawn could not be logged): it ends cancelled."""
        self.cancelled = True

    def learn_ns(self, ns: int) -> None:
        self.ns = ns

    def mark_killed(self, by: str, cancel: bool) -> None:
        """`bench kill` by `by` is ending it (with `cancel`, its job's task is withdrawn):
        the first to kill it is the one its job's ending names."""
        self.cancelled = self.cancelled or cancel
        if self.killed_by is None:
            self.killed_by = by

    @contextlib.asynccontextmanager
    async def viewed(self) -> AsyncIterator[None]:
        """One client attached while the block runs; when the last one leaves (its stream
        cut too), the session goes back to its own size."""
        self.attached += 1
        try:
            yield
        finally:
            self.attached -= 1
            term = self.term
            back = self.attached == 0 and self.live and term is not None
            if back and term is not None and (term.rows, term.cols) != self.size:
                with trio.CancelScope(shield=True):
                    await term.resize(*self.size)

    def set_agent(self, state: AgentState) -> None:
        """The agent's new state: whoever waits on `agent_changed` looks again."""
        self.agent = state
        self.agent_changed.set()
        self.agent_changed = trio.Event()

    def agent_info(self) -> m.AgentInfo | None:
        a = self.agent
        if self.adapter is None and a is None:
            return None  # neither an adapter nor a report: the screen is all there is
        # "self": no adapter, but its program runs `bench hook` by itself.
        adapter = self.adapter or "self"
        if a is None:
            return m.AgentInfo(adapter=adapter, screen=self.agent_screen)
        return m.AgentInfo(
            adapter=adapter,
            state=a.state,
            since=a.since,
            tool=a.tool,
            input=a.input,
            until=a.until,
            source=a.source,
            screen=self.agent_screen,
        )

    def queue_wake(self, wake: Wake) -> None:
        self.wakes.append(wake)
        self._poke.set()

    async def poked(self) -> None:
        await self._poke.wait()
        self._poke = trio.Event()

    @property
    def live(self) -> bool:
        return self.state is SessionState.RUNNING

    def info(self) -> m.SessionInfo:
        term = self.term  # None: reserved, its process not started yet
        idle = left = None
        if term is not None and self.live and term.last_output is not None:
            idle = int((trio.current_time() - max(term.last_output, self.last_input)) * 1000)
        if term is not None and self.live and self.deadline_at is not None:
            left = max(0, int((self.deadline_at - trio.current_time()) * 1000))
        return m.SessionInfo(
            session=self.id,
            handle=self.handle,
            pid=0 if term is None else term.pid,
            state=self.state.value,
            idle_ms=idle,
            exit=self.exit,
            signal=self.signal,
            argv=self.argv,
            job=self.job is not None,
            reply_to=[] if term is None else self.reply_to(),
            parent=self.parent,
            parent_handle=self.parent_handle,
            outcome=self.outcome,
            reason=self.reason,
            deadline_left_ms=left,
            stalled=self.stalled_at is not None and self.live,
            launch=None if term is None else self.launch,
            agent=self.agent_info(),
        )

    def reply_to(self) -> list[str]:
        """A job's reply-to addresses (for `bench ps --json` and the dashboard)."""
        if self.job is None:
            return []
        return list(self.job.reply_to)

    def record(self, ended_ms: int) -> Record:
        """What is kept on disk of it once settled (read back as a past.PastSession)."""
        info = self.info()
        return {
            "session": self.id,
            "handle": self.handle,
            "pid": info.pid,
            "exit": self.exit,
            "signal": self.signal,
            "argv": list(self.argv),
            "job": self.job is not None,
            "reply_to": info.reply_to,
            "parent": self.parent,
            "parent_handle": self.parent_handle,
            "lineage": list(self.lineage),
            "outcome": self.outcome,
            "reason": self.reason,
            "size": list(self.size),
            "ended_ms": ended_ms,
            "launch": None if self.launch is None else msgspec.to_builtins(self.launch),
        }

    async def type_input(self, data: bytes) -> None:
        """Operator input: serialised with wakes, and it holds wakes back (idle gate)."""
        self.last_input = trio.current_time()
        assert self.term is not None, "input reaches only a launched session"
        async with self.write_lock:
            await self.term.write(data)
        self.last_input = trio.current_time()


class Roster:
    """Who is running: the sessions by id, handle, token and pty leader, and the last
    exited ones. Sessions fills it; the mailroom, the reactor, the job host and the
    handlers look sessions up in it (so none of them needs the others)."""

    def __init__(self) -> None:
        self.by_id: dict[str, Session] = {}
        self.live: dict[str, Session] = {}  # handle -> live session
        self.by_token: dict[str, Session] = {}
        self.by_leader: dict[int, Session] = {}
        self.by_ns: dict[int, Session] = {}  # a sandboxed session's PID namespace inode
        # Sessions that exited under this daemon, then those read back from disk.
        self.exited: collections.deque[Session | PastSession] = collections.deque()

    def hold(self, s: Session) -> None:
        """A reserved session holds its handle and token from now on."""
        self.by_id[s.id] = s
        self.live[s.handle] = s
        self.by_token[s.token] = s

    def release(self, s: Session) -> None:
        """Forget a session: its handle, token, pty leader and namespace are free."""
        if self.live.get(s.handle) is s:
            del self.live[s.handle]
        self.by_token.pop(s.token, None)
        self.by_id.pop(s.id, None)
        if s.term is not None:
            self.by_leader.pop(s.term.pid, None)
        if s.ns is not None and self.by_ns.get(s.ns) is s:
            del self.by_ns[s.ns]

    @overload
    def find(self, name: str, live_only: Literal[True] = True) -> "Session": ...

    @overload
    def find(self, name: str, live_only: bool) -> "Session | PastSession": ...

    def find(self, name: str, live_only: bool = True) -> "Session | PastSession":
        """A session by handle or id: a live one first, else (live_only False) the
        newest exited one with that handle or id."""
        s = self.lookup(name) if not live_only else self.live.get(name) or self.by_id.get(name)
        if s is None or (live_only and not s.live):
            if live_only:
                raise WireError("no-such-session", f"no live session is called {name!r}")
            raise WireError("no-such-session", f"no session, live or exited, is called {name!r}")
        if s.term is None:
            raise WireError("no-such-session", f"session {name!r} is still starting")
        return s

    def lookup(self, name: str) -> "Session | PastSession | None":
        """The session `find(name, live_only=False)` would answer with, or None."""
        s = self.live.get(name) or self.by_id.get(name)
        if s is None:
            for old in reversed(self.exited):
                if name in (old.handle, old.id):
                    return old
        return s

    def family(self, name: str) -> tuple[str, ...]:
        """The id of the session `name` designates, then its spawners' ids, nearest
        first; () when there is none (what benchd.core.authority decides with)."""
        s = self.lookup(name)
        return () if s is None else (s.id, *s.lineage)

    def descendants(self, sid: str) -> list[Session]:
        """The live sessions below `sid` in the delegation tree, deepest first."""
        found = [s for s in self.live.values() if sid in s.lineage]
        return sorted(found, key=lambda s: -len(s.lineage))
