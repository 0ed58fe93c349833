"""The session/screen verb: a session's screen as the daemon's VT model renders it, live.

The first frame is the screen now; with `follow`, a new frame follows each change, at
most one per FRAME_S (a TUI redrawing a spinner 60 times a second costs the watcher ten
frames a second, not sixty), and only when the rendered screen differs from the last
frame sent. The stream ends when the session exits or the client goes away.

Colours: each frame carries, per line, the runs of cells whose colour or attributes are
not the default, as [start column, length, fg, bg, flags] (fg and bg are pyte's names,
"default", a colour name, or a six-digit hex; flags: b bold, i italics, u underline,
r reverse), so a viewer can paint what the model keeps.
"""

import trio

from bench_wire import messages as m

FRAME_S = 0.1


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


async def session_screen(d, conn, caller, req: m.SessionScreen) -> None:
    s = d.roster.find(req.handle, live_only=False)
    term = s.term
    last = await frame(req.id, term)
    await conn.send(last)
    if not req.follow or not s.live:
        await conn.send(m.EndFrame(id=req.id, reason="done" if s.live else "exited", exit=s.exit))
        return
    gone = False

    async def watch_client(scope):
        nonlocal gone
        while await conn.next_line() is not None:
            pass  # nothing more is said on a follow stream; EOF means the client left
        gone = True
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_client, nursery.cancel_scope)
        while s.live and not term.eof:
            changed = term.changed
            await changed.wait()
            await trio.sleep(FRAME_S)  # let a burst of output settle into one frame
            now = await frame(req.id, term)
            if (
                now.lines != last.lines
                or now.styles != last.styles
                or (now.cursor_row, now.cursor_col) != (last.cursor_row, last.cursor_col)
            ):
                await conn.send(now)
                last = now
        nursery.cancel_scope.cancel()
    if not gone:
        await conn.send(m.EndFrame(id=req.id, reason="exited", exit=s.exit))


HANDLERS = {m.SessionScreen: session_screen}
