"""An agent's own state, from the reports its hooks send (`bench hook EVENT`). Pure.

The events are bench's own, the same for every agent; which state each leads to is
docs/agents.md's table ("States"). Only the few payload fields that matter are read,
each checked for its type. A usage limit's reset time is the payload's `resets_at`,
else read from the error's own words (docs/agents.md, "Usage limits").
"""

import enum
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bench_wire import verbs

State = Literal["idle", "working", "blocked", "limited", "exited"]
EVENTS = verbs.HOOK_EVENTS
INPUT_CHARS = 2000  # of a blocked tool's input kept (and shown, escaped)
MESSAGE_CHARS = 2000  # of an error message searched for a reset time
RESET_HORIZON_MS = 7 * 86_400_000  # a reset further away than this is not believed
# "resets at 2026-01-02T15:04:05Z" (an offset, or Z; the date and time in ISO 8601).
ISO_RE = re.compile(r"\b(\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?(?:Z|[+-]\d\d:?\d\d))")
# "resets at 1767366245" (epoch seconds).
EPOCH_RE = re.compile(r"\bresets?\s+at\s+(\d{10})\b", re.IGNORECASE)
# "try again in 20s", "retry after 1.5 minutes", "resets in 6m0s".
AFTER_RE = re.compile(
    r"\b(?:try again|retry|resets?)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*[a-z]+\s*){1,4})",
    re.IGNORECASE,
)
PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)", re.IGNORECASE)
UNIT_MS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
}


@dataclass(frozen=True, slots=True)
class AgentState:
    state: State
    since: int  # wall ms of the report that set it
    tool: str | None = None  # blocked: the tool waiting for approval
    input: str | None = None  # blocked: its input, as JSON text, cut at INPUT_CHARS
    until: int | None = None  # limited: the reset time (wall ms), when known
    # "report"; "screen": only the screen said so (evidence, not a report); "process": its
    # process ended without an `end` report
    source: str = "report"
    # idle by its `start` report alone: the agent has started but has not ended a turn
    # yet. Claude Code reports its start before its input box reliably takes typed text
    # (a line typed 0.3 s after it was lost under load), so a fresh agent is typed to
    # behind the screen's full idle gate, as without an adapter.
    fresh: bool = False


class BadReport(ValueError):
    """A report that says nothing bench can use (unknown event, payload not JSON)."""


def payload_of(text: str) -> dict[str, object]:
    """The hook's JSON object; an empty payload is an empty object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise BadReport(f"the hook's input is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise BadReport("the hook's input is not a JSON object")
    return value


def _text(payload: dict[str, object], key: str) -> str | None:
    v = payload.get(key)
    return v if isinstance(v, str) else None


def _input_text(v: object) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= INPUT_CHARS else text[:INPUT_CHARS] + "…"


def _until(payload: dict[str, object]) -> int | None:
    """A reset time the agent gave (epoch seconds or ms), if any: `resets_at` at the top
    or under `rate_limits.*` (Claude Code's statusLine shape)."""
    found: list[float] = []

    def look(d: dict[str, object], depth: int) -> None:
        v = d.get("resets_at")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            found.append(float(v))
        if depth < 2:
            for sub in d.values():
                if isinstance(sub, dict):
                    look(sub, depth + 1)

    look(payload, 0)
    if not found:
        return None
    t = min(found)
    return int(t if t > 1e12 else t * 1000)


def reset_in_text(text: str, now: int) -> int | None:
    """The reset time (wall ms) an error message gives, if it gives one: an ISO 8601
    time with its zone, epoch seconds after "resets at", or a wait ("try again in 20s",
    "6m0s"). Only a time after `now` and within RESET_HORIZON_MS counts."""
    text = text[:MESSAGE_CHARS]
    at: int | None = None
    if (found := ISO_RE.search(text)) is not None:
        try:
            at = int(datetime.fromisoformat(found.group(1).replace(" ", "T")).timestamp() * 1000)
        except ValueError:
            at = None
    elif (found := EPOCH_RE.search(text)) is not None:
        at = int(found.group(1)) * 1000
    elif (found := AFTER_RE.search(text)) is not None:
        wait = 0.0
        for number, unit in PART_RE.findall(found.group(1)):
            scale = UNIT_MS.get(unit.lower())
            if scale is None:
                return None  # not a duration after all ("in 5 places")
            wait += float(number) * scale
        at = now + int(wait)
    if at is None or not now < at <= now + RESET_HORIZON_MS:
        return None
    return at


def step(cur: AgentState | None, event: str, payload: dict[str, object], now: int) -> AgentState:
    if event not in EVENTS:
        raise BadReport(f"unknown hook event {event!r}; known: {', '.join(EVENTS)}")
    if cur is not None and cur.state == "exited":
        return cur  # final: a late report from a dying agent changes nothing
    match event:
        case "start":
            if cur is not None and cur.state == "limited" and not expired(cur, now):
                return cur
            return AgentState("idle", now, fresh=True)
        case "prompt" | "tool":
            return AgentState("working", now)
        case "stop" | "interrupt":
            if cur is not None and cur.state == "limited" and not expired(cur, now):
                return cur  # Claude Code ends a limited turn with Stop after StopFailure
            return AgentState("idle", now)
        case "stop-failure":
            if _text(payload, "error") == "rate_limit":
                until = _until(payload)
                if until is None:
                    until = reset_in_text(_text(payload, "error_message") or "", now)
                return AgentState("limited", now, until=until)
            return AgentState("idle", now)
        case "permission":
            tool = _text(payload, "tool_name") or "?"
            return AgentState(
                "blocked", now, tool=tool, input=_input_text(payload.get("tool_input"))
            )
        case "notification":
            kind = _text(payload, "notification_type")
            if kind == "permission_prompt" and (cur is None or cur.state != "blocked"):
                return AgentState("blocked", now, tool=None, input=_text(payload, "message"))
            if kind == "idle_prompt" and cur is not None and cur.state == "working":
                return AgentState("idle", now)
            return cur if cur is not None else AgentState("idle", now)
        case _:  # "end"
            return AgentState("exited", now)


def answered(cur: AgentState, now: int) -> AgentState:
    return AgentState("working", now)


def expired(cur: AgentState, now: int) -> bool:
    return cur.state == "limited" and cur.until is not None and now >= cur.until


def may_type(cur: AgentState | None, now: int) -> bool:
    """Whether the agent's own report lets a wake be typed: unreported (None: the screen
    decides then), idle at its prompt, or limited past its reset time."""
    return cur is None or cur.state == "idle" or expired(cur, now)


# A session's lifecycle, beside the agent's own state: a session runs from the moment its
# handle is held (its process may still be starting) until its child exits; then it is
# exited for good. `bench ps --json` shows the enum's value. Any other move is a bug, and
# `advance` raises IllegalTransition rather than let it through.


class IllegalTransition(Exception):
    """A session was asked to make a move its lifecycle does not have."""


class SessionState(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"


def advance(current: SessionState, new: SessionState) -> SessionState:
    """`new`, if a session may move there from `current` (running -> exited only)."""
    if current is not SessionState.RUNNING or new is not SessionState.EXITED:
        raise IllegalTransition(f"SessionState: {current} -> {new} is not a move")
    return new
