"""What the dashboard knows, kept up to date from the event stream. Pure: no I/O.

`Board` is fed one snapshot (session/list and each mailbox's unread count) when the
dashboard connects, then every event; the sessions pane is drawn from it. Whose row,
job and count an event is: docs/dashboard.md, "Panes".
"""

from dataclasses import dataclass, field
from typing import Any

from bench_cli import output
from bench_cli.eventtext import Event, clock
from bench_wire.messages import current_outcome
from bench_wire.untrusted import mask

# An answer, or an object in one (SessionInfo, MessageMeta, ScreenFrame), as a JSON
# object read by field name. `Any` is that boundary.
Answer = dict[str, Any]


@dataclass
class Row:
    handle: str
    session: str = ""
    pid: int = 0
    state: str = "running"
    idle_ms: int | None = None
    idle_at: float = 0.0  # monotonic time idle_ms was measured (idle grows from there)
    unread: int = 0
    wake: str = "-"  # e.g. "woken 12:01:03" or "capped"
    job: bool = False
    reply_to: list[str] = field(default_factory=list)  # a job's: who is owed a reply
    outcome: str = ""
    exit: int | None = None
    signal: int | None = None
    parent: str | None = None  # the id of the session that spawned it (a delegated job)
    stalled: bool = False  # a job's child idle past its stall time without a report
    deadline_left_ms: int | None = None  # the time left to its deadline, measured at idle_at
    agent: str = ""  # an adapter session's agent, by its own report: idle, blocked Bash, ...

    def idle_text(self, now: float) -> str:
        if self.state != "running" or self.idle_ms is None:
            return "-"
        return output.duration(self.idle_ms / 1000 + (now - self.idle_at))

    def job_text(self) -> str:
        if not self.job:
            return ""
        to = ("->" + ",".join(self.reply_to)) if self.reply_to else ""
        stalled = "stalled" if self.stalled and not self.outcome else ""
        return " ".join(x for x in ("job" + to, self.outcome, stalled) if x)

    def left_text(self, now: float) -> str:
        """The time left to the session's deadline ("" without one)."""
        if self.state != "running" or self.deadline_left_ms is None:
            return ""
        return "left " + output.duration(self.deadline_left_ms / 1000 - (now - self.idle_at))

    def exit_text(self) -> str:
        if self.exit is not None:
            return f"exit {self.exit}"
        if self.signal is not None:
            return output.signal_name(self.signal)
        if self.state == "running" and self.agent:
            return self.agent  # what the agent said of itself (blocked first catches the eye)
        return self.state


def _agent_text(a: "Answer | None") -> str:
    """An agent's state as the sessions pane shows it (from ps's `agent` or an
    agent/state event)."""
    if not a or not a.get("state"):
        return ""
    if a["state"] == "blocked":
        return mask("blocked " + (a.get("tool") or "?"))[:24]
    return str(a["state"])


# The events that change a mailbox's unread count, and the field naming the mailbox.
_COUNTED = {"mail/sent": "to", "mail/read": "handle", "agent/woken": "handle"}


@dataclass
class Board:
    rows: dict[str, Row] = field(default_factory=dict)
    last_seq: int = 0
    events: list[Event] = field(default_factory=list)
    keep: int = 2000  # events kept for the events pane
    # handle -> the seq its unread count was read at (events up to it are in the count)
    exact_at: dict[str, int] = field(default_factory=dict)
    # handle -> the seq of the last event that changed its unread count here
    counted_at: dict[str, int] = field(default_factory=dict)
    by_session: dict[str, Row] = field(default_factory=dict)  # the rows by session id

    def load(
        self, sessions: list[Answer], unread: dict[str, int], now: float, seq: int = 0
    ) -> None:
        """The snapshot, as the daemon had it when its log ended at `seq`."""
        rows: dict[str, Row] = {}
        for s in sessions:
            old = self.rows.get(s["handle"])
            r = Row(
                handle=s["handle"],
                session=s["session"],
                pid=s["pid"],
                state=s["state"],
                idle_ms=s.get("idle_ms"),
                idle_at=now,
                job=bool(s.get("job")),
                reply_to=list(s.get("reply_to") or []),
                exit=s.get("exit"),
                signal=s.get("signal"),
                parent=s.get("parent"),
                stalled=bool(s.get("stalled")),
                deadline_left_ms=s.get("deadline_left_ms"),
                agent=_agent_text(s.get("agent")),
                outcome=current_outcome(s.get("outcome") or "")[0] or "",
            )
            if old is not None and old.session == r.session:
                r.wake, r.outcome = old.wake, r.outcome or old.outcome
            prev = rows.get(r.handle)
            if prev is None or prev.state != "running":  # a live session wins over an old one
                rows[r.handle] = r
        for h, n in unread.items():
            if h in rows:
                rows[h].unread = n
        self.rows = rows
        # Kept only for the handles shown: bounded by the rows.
        self.exact_at = {h: seq for h in unread if h in rows}
        self.counted_at = {}
        self.by_session = {r.session: r for r in rows.values()}

    def set_unread(self, handle: str, n: int, seq: int) -> bool:
        """`n` unread for `handle` as of `seq`; refused (False) when this board counted
        an event of that mailbox after `seq` (the answer would undo it)."""
        r = self.rows.get(handle)
        if r is None or self.counted_at.get(handle, 0) > seq:
            return False
        r.unread = n
        self.exact_at[handle] = max(seq, self.exact_at.get(handle, 0))
        return True

    def _count(self, handle: str, seq: int, delta: int) -> None:
        """Count an event of `handle`'s mailbox, unless its count was read after it."""
        r = self.rows.get(handle)
        if r is None or seq <= self.exact_at.get(handle, 0):
            return
        r.unread = max(0, r.unread + delta)
        self.counted_at[handle] = seq

    def row_of(self, session: str | None) -> Row | None:
        """The row of the session with this id, if that session is the one shown."""
        r = self.by_session.get(session or "")
        return r if r is not None and self.rows.get(r.handle) is r else None

    def apply(self, ev: Event, now: float, count: bool = True) -> bool:
        """Take one event; True when the sessions pane should be redrawn.

        With count=False (history from before the snapshot, whose counts already include
        it) unread counts are left alone; last wakes and job outcomes are still taken.
        """
        if ev.get("seq", 0) <= self.last_seq:
            return False
        self.last_seq = ev["seq"]
        self.events.append(ev)
        if len(self.events) > self.keep:
            del self.events[: len(self.events) - self.keep]
        kind = ev.get("kind")
        seq = ev["seq"]
        if kind == "session/spawned" and count:
            h = ev["handle"]
            old = self.rows.get(h)
            if old is not None:
                self.by_session.pop(old.session, None)  # bounded by the rows
            new = self.rows[h] = Row(
                handle=h,
                session=ev["session"],
                pid=ev["pid"],
                idle_ms=0,
                idle_at=now,
                job=bool(ev.get("job")),
                unread=old.unread if old is not None else 0,
            )
            self.by_session[new.session] = new
            return True
        if kind in _COUNTED:
            h = ev.get(_COUNTED[kind]) or ""
            if count and (kind != "agent/woken" or ev.get("mail_id")):
                # A wake retires the message it announces; a digest retires nothing.
                self._count(h, seq, +1 if kind == "mail/sent" else -1)
            r = self.rows.get(h)
            if kind == "agent/woken" and r is not None and ev.get("session") == r.session:
                r.wake = "woken " + clock(ev["ts"])
                if count:
                    # A wake types into the session: idle from now. Not for history:
                    # the snapshot's idle time already counts from the last wake.
                    r.idle_ms, r.idle_at = 0, now
            return r is not None
        if kind == "job/delegated":
            r = self.row_of(ev.get("child"))
            if r is None:
                return False
            r.parent = ev.get("parent")
            r.reply_to = list(ev.get("reply_to") or [])
            return True
        r = self.rows.get(ev.get("handle") or "")
        # Everything else is of one session: never drawn on another of the same handle.
        if r is None or ev.get("session") != r.session:
            return False
        if kind == "session/exited" and count:
            r.state, r.exit, r.signal = "exited", ev.get("exit"), ev.get("signal")
        elif kind == "wake/capped":
            r.wake = "capped " + clock(ev["ts"])
        elif kind == "job/settled":
            r.outcome = current_outcome(ev.get("outcome", ""))[0] or ""
            r.stalled = False
        elif kind == "job/stalled":
            r.stalled = True
        elif kind == "job/active":
            r.stalled = False
        elif kind == "agent/state":
            r.agent = _agent_text(ev)
        else:
            return False
        return True

    def nested(self) -> list[tuple[str, int]]:
        """(handle, depth) with each session under the one that spawned it; among
        siblings the live ones first, then the exited ones, each by handle."""

        def spawner(h: str) -> str | None:
            up = self.up(self.rows[h])
            return up.handle if up is not None else None

        order = sorted(self.rows, key=lambda h: (self.rows[h].state != "running", h))
        return [(h, depth) for depth, h in output.forest(order, lambda h: h, spawner)]

    def up(self, r: Row) -> Row | None:
        """The row of the session that spawned `r`'s, if that very session is shown (a
        later session of its handle is not its parent)."""
        p = self.row_of(r.parent)
        return p if p is not r else None

    def filtered(self, kind: str = "", handle: str = "") -> list[Event]:
        """The kept events that pass the events pane's filter (`in_filter`)."""
        return [ev for ev in self.events if in_filter(ev, kind, handle)]


def in_filter(ev: Event, kind: str, handle: str) -> bool:
    """Whether `ev`'s kind starts with `kind` and it names `handle` ("": any)."""
    if kind and not ev.get("kind", "").startswith(kind):
        return False
    return not handle or handle in (ev.get("handle"), ev.get("to"), ev.get("from"))


def threads(messages: list[Answer]) -> list[tuple[int, Answer]]:
    """A listing's messages as threads, in send order: (depth, message), each reply
    under its parent."""
    ordered = sorted(messages, key=lambda m: m["mail_id"])
    return output.forest(ordered, lambda m: m["mail_id"], lambda m: m.get("in_reply_to"))


# Between attempts to reach a daemon that is not running (docs/dashboard.md, "When the
# daemon is not there").
RETRY_FIRST_S = 0.25
RETRY_LAST_S = 4.0


def retry_delay(failures: int) -> float:
    """Seconds to wait after `failures` attempts in a row found no daemon (0: the first)."""
    return min(RETRY_LAST_S, RETRY_FIRST_S * 2.0 ** min(failures, 16))
