"""An event as one line of `bench events`: sequence, local time, kind, then its fields.

The fields are the event's own (--json prints them exactly); here a signal is named
(`signal=SIGHUP`) and the kind may be coloured, as a piece apart from the fields so that
nothing in them can pass for colour (see `output.write`).
"""

import re
import time

from bench_cli import humanize, output
from bench_wire.client import dumps

_BARE = re.compile(r"[^\s\"=,]+")

KIND_COLOUR = {
    "session/exited": "yellow",
    "job/settled": "cyan",
    "job/limited": "red",
    "limit/hit": "red",
    "wake/capped": "red",
    "outbox/retry": "red",
}


def field(k: str, v) -> str:
    """A field's value as text: lists comma-joined, words bare, anything with spaces
    quoted, a signal by its name."""
    if k == "signal" and isinstance(v, int) and not isinstance(v, bool):
        return humanize.signal_name(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(field("", x) for x in v)
    if isinstance(v, str):
        return v if v and _BARE.fullmatch(v) else dumps(v)
    return str(v)


def format_event(ev: dict, on: bool = False) -> list:
    """The line's pieces for `output.write` (the kind painted when `on`)."""
    t = ev["ts"] / 1000
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{ev['ts'] % 1000:03d}"
    rest = " ".join(
        f"{k}={field(k, v)}"
        for k, v in ev.items()
        if k not in ("seq", "ts", "kind") and v is not None
    )
    kind = output.paint(f"{ev['kind']:<18}", KIND_COLOUR.get(ev["kind"]), on)
    return [f"{ev['seq']:>6}  {ts}  ", kind, f" {rest}"]
