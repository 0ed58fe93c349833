"""A session's screen as the daemon's VT model renders it: one frame of session/screen
(the verb itself: benchd.server.handlers.sessions).

Colours: each frame carries, per line, the runs of cells whose colour or attributes are
not the default, as [start column, length, fg, bg, flags] (fg and bg are pyte's names,
"default", a colour name, or a six-digit hex; flags: b bold, i italics, u underline,
r reverse), so a viewer can paint what the model keeps.
"""

from collections.abc import Callable
from typing import Protocol, TypeVar

import pyte

from bench_wire import messages as m

T = TypeVar("T")
# One run of styled cells: [start column, length, fg, bg, flags].
Run = list[int | str]


class Inspectable(Protocol):
    """A terminal whose screen can be looked at in a worker thread (a live session's
    Terminal, or an exited one's PastTerminal)."""

    async def inspect(self, fn: Callable[[pyte.Screen, list[str]], T]) -> T: ...


def _runs(screen: pyte.Screen, rows: int, cols: int) -> list[list[Run]]:
    out = []
    buf = screen.buffer
    for y in range(rows):
        line = buf[y]
        runs: list[Run] = []
        # The run being extended (always runs[-1]): its start, length and style.
        cur: tuple[int, int, tuple[str, str, str]] | None = None
        for x in range(cols):
            c = line[x]
            flags = (
                ("b" if c.bold else "")
                + ("i" if c.italics else "")
                + ("u" if c.underscore else "")
                + ("r" if c.reverse else "")
            )
            style = (c.fg, c.bg, flags)
            if style == ("default", "default", ""):
                cur = None
                continue
            if cur is not None and cur[0] + cur[1] == x and cur[2] == style:
                cur = (cur[0], cur[1] + 1, style)
                runs[-1][1] = cur[1]
            else:
                cur = (x, 1, style)
                runs.append([x, 1, *style])
        out.append(runs)
    return out


async def frame(rid: m.Id, term: Inspectable) -> m.ScreenFrame:
    """The screen now, rendered off the loop (a big screen must not stall other clients)."""

    def build(sc: pyte.Screen, lines: list[str]) -> m.ScreenFrame:
        lines = [line.rstrip() for line in lines]
        return m.ScreenFrame(
            id=rid,
            lines=lines,
            cursor_row=sc.cursor.y,
            cursor_col=sc.cursor.x,
            rows=sc.lines,
            cols=sc.columns,
            styles=_runs(sc, sc.lines, sc.columns),
        )

    return await term.inspect(build)
