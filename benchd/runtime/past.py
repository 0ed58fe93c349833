"""Sessions that exited under an earlier daemon, read back from disk (benchd.store.exited).

A past session answers what `bench ps -a`, `bench tail` and `tail --screen` ask of an
exited one: its record, and a terminal that is only its kept output (the screen is
rebuilt from that output when someone asks for it).
"""

import pyte
import trio

from bench_wire import messages as m
from benchd.core.states import SessionState
from benchd.runtime import vtscreen
from benchd.runtime.terminal import render_line


class PastTerminal:
    """What is left of an exited session's terminal: its output, no process."""

    def __init__(self, pid: int, output: bytes, rows: int, cols: int):
        self.pid = pid
        self.scrollback = bytearray(output)
        self.rows, self.cols = rows, cols
        self.eof = True
        self._lock = trio.Lock()

    def _screen(self):
        screen = vtscreen.Screen(self.cols, self.rows)
        pyte.ByteStream(screen).feed(bytes(self.scrollback))
        lines = [render_line(screen.buffer[y], screen.columns) for y in range(screen.lines)]
        return screen, lines

    async def render(self) -> tuple[list[str], int, int]:
        async with self._lock:
            screen, lines = await trio.to_thread.run_sync(self._screen)
            return lines, screen.cursor.y, screen.cursor.x

    async def inspect(self, fn):
        async with self._lock:

            def work():
                return fn(*self._screen())

            return await trio.to_thread.run_sync(work)


class PastSession:
    """An exited session known only from its record on disk."""

    live = False
    job = None
    cancelled = False
    killed_by = None

    def __init__(self, record: dict, output: bytes):
        self.record = record
        self.id: str = record["session"]
        self.handle: str = record["handle"]
        self.state = SessionState.EXITED
        self.exit = record.get("exit")
        self.signal = record.get("signal")
        self.parent: str | None = record.get("parent")
        self.parent_handle: str | None = record.get("parent_handle")
        self.lineage: tuple[str, ...] = tuple(record.get("lineage") or ())
        self.outcome: str | None = record.get("outcome")
        rows, cols = record.get("size") or (40, 120)
        self.term = PastTerminal(int(record.get("pid") or 0), output, rows, cols)
        self.exited = trio.Event()
        self.exited.set()

    def info(self) -> m.SessionInfo:
        r = self.record
        return m.SessionInfo(
            session=self.id,
            handle=self.handle,
            pid=self.term.pid,
            state="exited",
            idle_ms=None,
            exit=self.exit,
            signal=self.signal,
            argv=list(r.get("argv") or []),
            job=bool(r.get("job")),
            reply_to=list(r.get("reply_to") or []),
            parent=self.parent,
            parent_handle=self.parent_handle,
            outcome=self.outcome,
        )


def record_of(s, ended_ms: int) -> dict:
    """What is kept on disk of a settled session (a benchd.runtime.sessions Session)."""
    info = s.info()
    return {
        "session": s.id,
        "handle": s.handle,
        "pid": info.pid,
        "exit": s.exit,
        "signal": s.signal,
        "argv": list(s.argv),
        "job": s.job is not None,
        "reply_to": info.reply_to,
        "parent": s.parent,
        "parent_handle": s.parent_handle,
        "lineage": list(s.lineage),
        "outcome": s.outcome,
        "size": list(s.size),
        "ended_ms": ended_ms,
    }
