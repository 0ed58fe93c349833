"""An event as one line of text: for `bench events` (`format_event`) and the dashboard's
narrow events pane (`event_line`: who it is about first, the long ids last)."""

import re
import time
from typing import Any

from bench_cli import output
from bench_wire.client import dumps
from bench_wire.config import seconds_text
from bench_wire.untrusted import mask

# An event as the wire carries it (EventFrame.event), read by field name.
Event = dict[str, Any]

_BARE = re.compile(r"[^\s\"=,]+")

KIND_COLOUR = {
    "session/exited": "yellow",
    "job/settled": "cyan",
    "job/limited": "red",
    "limit/hit": "red",
    "wake/capped": "red",
    "outbox/retry": "red",
    "agent/state": "magenta",
    "agent/answered": "cyan",
    "agent/report-limited": "red",
}


# Fields that hold a wall-clock time in ms since the epoch: shown as a local time.
TIME_FIELDS = ("until", "deadline_ms", "at")
# A field's value that means "not this" in an event of a kind: left out like an empty one.
UNSET = {("wait/refused", "limit"): 0}


def _has_value(kind: object, k: str, v: object) -> bool:
    if v is None or v == "" or v == [] or v == {}:
        return False
    unset = UNSET.get((str(kind), k))
    return unset is None or unset != v


def fields(
    ev: Event, shown: tuple[str, ...], last: tuple[str, ...] = ()
) -> list[tuple[str, object]]:
    """The event's fields with a value, but those `shown` already: in its order, then
    `last`."""
    kind = ev.get("kind")
    out = [
        (k, v) for k, v in ev.items() if k not in shown and k not in last and _has_value(kind, k, v)
    ]
    return out + [(k, ev[k]) for k in last if _has_value(kind, k, ev.get(k))]


def label(k: str) -> str:
    """A field's name in text: its unit is in its value (`deadline=…`, `idle=42s`)."""
    return k[:-3] if k.endswith("_ms") else k


def field(k: str, v: object) -> str:
    """A field's value as text: lists comma-joined, words bare, others quoted, a signal by
    name, a time local, milliseconds as a duration."""
    if isinstance(v, int) and not isinstance(v, bool):
        if k == "signal":  # a signal number
            return output.signal_name(v)
        if k in TIME_FIELDS:
            t = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(v / 1000))
            return f"{t}.{v % 1000:03d}"
        if k.endswith("_ms"):
            return seconds_text(v / 1000) if v else "0s"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(field("", x) for x in v)
    if isinstance(v, str):
        return v if v and _BARE.fullmatch(v) else dumps(v)
    return str(v)


def format_event(ev: Event, on: bool = False) -> list[str | output.Painted]:
    """The line's pieces for `output.write` (the kind painted when `on`)."""
    t = ev["ts"] / 1000
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{ev['ts'] % 1000:03d}"
    rest = " ".join(f"{label(k)}={field(k, v)}" for k, v in fields(ev, ("seq", "ts", "kind")))
    kind = output.paint(f"{ev['kind']:<18}", KIND_COLOUR.get(ev["kind"]), on)
    return [f"{ev['seq']:>6}  {ts}  ", kind, f" {rest}"]


def clock(ts_ms: int) -> str:
    """An event's local time of day, as the dashboard shows it."""
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000))


# Long ids, alike from line to line, last: the fields that tell events apart stay in view.
_LAST = ("session", "mail_id", "key", "path")
_SHOWN_FIRST = ("seq", "ts", "kind", "from", "to", "handle")


def parties(ev: Event) -> str:
    """Who an event is about: `from -> to` for mail and wakes, else the handle."""
    to = ev.get("to") or ev.get("handle") or ""
    if ev.get("from"):
        return f"{ev['from']} -> {to}"
    if ev.get("to"):
        return f"-> {to}"
    return ev.get("handle") or ""


def event_line(ev: Event) -> str:
    """One line of the dashboard's events pane, masked (`bench_wire.untrusted.mask`)."""
    rest = [f"{label(k)}={field(k, v)}" for k, v in fields(ev, _SHOWN_FIRST, _LAST)]
    head = f"{ev['seq']} {clock(ev['ts'])} {ev['kind']:<14} {parties(ev)}"
    return mask(f"{head}  {' '.join(rest)}".rstrip())
