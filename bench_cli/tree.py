"""`bench ps --tree`: sessions drawn under the session that spawned them.

A session's `parent` (in `bench ps --json`) is the id of the session that started it as
a job; sessions the operator started, and those whose parent is not listed (exited and
not asked for with -a, or pruned), are roots. Children follow their parent in spawn
order.
"""

from collections.abc import Callable
from typing import Any

from bench_cli import output
from bench_wire import outcomes

# A session as `bench ps` has it: a row of the session/list answer (bench_wire's
# SessionInfo), a JSON object as the blocking client decodes it; `Any` is that boundary.
Row = dict[str, Any]


def job_state(s: Row) -> str:
    """What the job of a session is doing: -, running, stalled, settling, or its outcome
    (bench_wire.outcomes; a record of an earlier version in today's words)."""
    if not s.get("job"):
        return "-"
    if s.get("outcome"):
        return outcomes.current(s["outcome"])[0] or "-"
    if s["state"] == "running":
        return "stalled" if s.get("stalled") else "running"
    return "settling"


def ordered(rows: list[Row]) -> list[tuple[int, bool, list[bool], Row]]:
    """(depth, last among its siblings, which ancestors were last, row) in tree order."""
    ids = {s["session"] for s in rows}
    children: dict[str | None, list[Row]] = {}
    for s in rows:
        parent = s.get("parent") if s.get("parent") in ids else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, bool, list[bool], Row]] = []

    def walk(parent: str | None, depth: int, lasts: list[bool]) -> None:
        kids = children.get(parent, [])
        for i, s in enumerate(kids):
            last = i == len(kids) - 1
            out.append((depth, last, lasts, s))
            walk(s["session"], depth + 1, [*lasts, last])

    walk(None, 0, [])
    return out


def render(
    rows: list[Row],
    exit_text: Callable[[Row], str],
    state_colour: Callable[[Row], str | None],
    on: bool,
) -> list[str | output.Painted]:
    """The tree as pieces for `output.write`: the state painted as a piece of its own, so
    nothing in a handle or argv can colour."""
    pieces: list[str | output.Painted] = [
        f"{'HANDLE':<28} {'SESSION':<10} {'PID':>7}  {'STATE':<8} {'JOB':<11} EXIT     COMMAND"
    ]
    for depth, last, lasts, s in ordered(rows):
        if depth == 0:
            name = s["handle"]
        else:
            lead = "".join("   " if done else "│  " for done in lasts[1:])
            name = lead + ("└─ " if last else "├─ ") + s["handle"]
        pieces += [f"\n{name:<28} {s['session']:<10} {s['pid']:>7}  "]
        pieces += [output.paint(f"{s['state']:<8}", state_colour(s), on)]
        pieces += [f" {job_state(s):<11} {exit_text(s):<7}  {' '.join(s.get('argv') or [])}"]
    return pieces
