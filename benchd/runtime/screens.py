"""A session's screen as the daemon's VT model renders it: one frame of session/screen
(the verb itself: benchd.server.handlers.sessions).

Colours: each frame carries, per line, the runs of cells whose colour or attributes are
not the default, as [start column, length, fg, bg, flags] (fg and bg are pyte's names,
"default", a colour name, or a six-digit hex; flags: b bold, i italics, u underline,
r reverse), so a viewer can paint what the model keeps.
"""

from bench_wire import messages as m


def _runs(screen, rows: int, cols: int) -> list[list[list]]:
    out = []
    buf = screen.buffer
    for y in range(rows):
        line = buf[y]
        runs: list[list] = []
        cur = None
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
            if cur is not None and cur[0] + cur[1] == x and tuple(cur[2:]) == style:
                cur[1] += 1
            else:
                cur = [x, 1, *style]
                runs.append(cur)
        out.append(runs)
    return out


async def frame(rid, term) -> m.ScreenFrame:
    """The screen now, rendered off the loop (a big screen must not stall other clients)."""

    def build(sc, lines: list[str]) -> m.ScreenFrame:
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
