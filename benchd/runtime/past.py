"""Past sessions: exited ones kept in BENCH_DIR/sessions/<id>/ and read back after a
restart (docs/limits.md, "Exited sessions kept").
"""

import json
import os
import re
import shutil
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pyte
import trio

from bench_wire import messages as m
from benchd.runtime import vt
from benchd.runtime.terminal import render_line
from benchd.store.fileio import fsync_dir, replace_file

DIR = "sessions"
SID_RE = re.compile(r"s[0-9a-f]{8}")


class ExitedStore:
    def __init__(self, bench_dir: str, kept: int, scrollback_bytes: int):
        self.root = os.path.join(bench_dir, DIR)
        self.kept = kept
        self.scrollback_bytes = scrollback_bytes

    def _dir(self, sid: str) -> str:
        if SID_RE.fullmatch(sid) is None:
            raise ValueError(f"{sid!r} is not a session id")
        return os.path.join(self.root, sid)

    def save(self, sid: str, record: dict[str, Any], output: bytes) -> None:
        """Write one exited session (blocking: run it in a worker thread)."""
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        d = self._dir(sid)
        os.makedirs(d, mode=0o700, exist_ok=True)
        keep = output[-self.scrollback_bytes :] if self.scrollback_bytes else b""
        replace_file(os.path.join(d, "output"), keep)
        replace_file(os.path.join(d, "info.json"), json.dumps(record).encode())
        fsync_dir(d)
        fsync_dir(self.root)

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if SID_RE.fullmatch(n)]
        except FileNotFoundError:
            return []

    def load(self) -> list[tuple[dict[str, Any], bytes]]:
        """The newest `kept` exited sessions, oldest first; the rest are removed."""
        names = self._names()
        found = []
        for name in names:
            d = os.path.join(self.root, name)
            try:
                with open(os.path.join(d, "info.json"), "rb") as f:
                    record = json.loads(f.read())
                with open(os.path.join(d, "output"), "rb") as f:
                    output = f.read()
            except (OSError, ValueError):
                continue  # half written by a crash at save: skipped, removed with the old
            if not isinstance(record, dict) or record.get("session") != name:
                continue
            found.append((int(record.get("ended_ms") or 0), record, output))
        found.sort(key=lambda x: x[0])
        keep = found[-self.kept :] if self.kept else []
        kept_ids = {r["session"] for _, r, _ in keep}
        for name in names:
            if name not in kept_ids:
                self.remove(name)
        return [(r, out) for _, r, out in keep]

    def remove(self, sid: str) -> None:
        shutil.rmtree(self._dir(sid), ignore_errors=True)

    def prune(self) -> None:
        for name in self._names():
            self.remove(name)


T = TypeVar("T")
# A settled session's record (Session.record); one from an older daemon may lack keys.
Record = dict[str, Any]


class PastTerminal:
    """What is left of an exited session's terminal: its output, no process."""

    def __init__(self, pid: int, output: bytes, rows: int, cols: int):
        self.pid = pid
        self.scrollback = bytearray(output)
        self.rows, self.cols = rows, cols
        self.eof = True
        self._lock = trio.Lock()

    async def render(self) -> tuple[list[str], int, int]:
        return await self.inspect(lambda screen, lines: (lines, screen.cursor.y, screen.cursor.x))

    async def inspect(self, fn: Callable[[pyte.Screen, list[str]], T]) -> T:
        """`fn(screen, lines)` of the screen rebuilt from the kept output, in a worker thread."""

        def work() -> T:
            screen = vt.Screen(self.cols, self.rows)
            pyte.ByteStream(screen).feed(bytes(self.scrollback))
            lines = [render_line(screen.buffer[y], screen.columns) for y in range(screen.lines)]
            return fn(screen, lines)

        async with self._lock:
            return await trio.to_thread.run_sync(work)


class PastSession:
    """An exited session known only from its record on disk: what `bench ps -a`, `tail`
    and `tail --screen` read of it, and nothing of a running one."""

    live = False  # it ran under an earlier daemon and has ended

    def __init__(self, record: Record, output: bytes):
        self.record = record
        self.id: str = record["session"]
        self.handle: str = record["handle"]
        self.exit: int | None = record.get("exit")
        self.signal: int | None = record.get("signal")
        self.parent: str | None = record.get("parent")
        self.parent_handle: str | None = record.get("parent_handle")
        self.lineage: tuple[str, ...] = tuple(record.get("lineage") or ())
        # Records of earlier versions may say outcome_unknown: read in today's words.
        self.outcome, self.reason = m.current_outcome(record.get("outcome"), record.get("reason"))
        rows, cols = record.get("size") or (40, 120)
        self.term = PastTerminal(int(record.get("pid") or 0), output, rows, cols)

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
            reason=self.reason,
            launch=_launch(r.get("launch")),
        )


def _launch(raw: object) -> m.Launch | None:
    """A record's launch, checked (records are files any process of the user can write)."""
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, m.Launch)
    except msgspec.ValidationError:
        return None
