"""The daemon's own process: the OS calls it makes that need care, and its log
(BENCH_DIR/benchd.log, one JSON object a line).
"""

import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable

import msgspec

from bench_wire.messages import Event
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.core.names import Log as Log

PR_SET_CHILD_SUBREAPER = 36


def libc_prctl() -> Callable[[int, int], int] | None:
    """libc's prctl, looked up in the daemon (not in a forked child); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants: a process that leaves a
    session and whose parent exits is re-parented to the daemon instead of init, so it
    can still be told apart from the operator's own processes."""
    prctl = libc_prctl()
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, 1) == 0


def child_pids(pid: int | None = None) -> list[int]:
    """A process's children (this one's by default), oldest first; those of its main
    thread, which is the one that forks them."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def command_name(pid: int) -> str | None:
    """A process's command name (/proc/PID/comm), None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def reap_zombie(pid: int) -> bool:
    """Collect `pid` if it is a child that has exited; never blocks."""
    try:
        got, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return got == pid


LEVELS = {logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error"}


class JsonLog:
    """One JSON object a line: the context, `event`, `level`, `timestamp` (UTC, ISO 8601)
    and, from `exception`, the traceback being handled. Not a logging library: its import
    cost a tenth of a second at every start."""

    def __init__(self, logger: logging.Logger, wall: WallClock = SYSTEM_WALL) -> None:
        self._logger = logger
        self._wall = wall

    def _write(self, level: int, event: str, kw: dict[str, object], trace: bool) -> None:
        if not self._logger.isEnabledFor(level):
            return
        ms = self._wall.wall_ms()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000))
        line: dict[str, object] = {**kw, "event": event, "level": LEVELS[level]}
        line["timestamp"] = f"{stamp}.{ms % 1000:03d}Z"
        if trace:
            line["exception"] = traceback.format_exc()
        self._logger.log(level, json.dumps(line, default=repr))

    def info(self, event: str, **kw: object) -> None:
        self._write(logging.INFO, event, kw, False)

    def warning(self, event: str, **kw: object) -> None:
        self._write(logging.WARNING, event, kw, False)

    def error(self, event: str, **kw: object) -> None:
        self._write(logging.ERROR, event, kw, False)

    def exception(self, event: str, **kw: object) -> None:
        self._write(logging.ERROR, event, kw, True)


def fields_of(ev: Event) -> dict[str, object]:
    """An event's own fields (no seq, no ts), for a benchd.log line that says the same."""
    out = msgspec.structs.asdict(ev)
    del out["seq"], out["ts"]
    return out


def setup_log(path: str, wall: WallClock = SYSTEM_WALL) -> JsonLog:
    # A line the disk refuses (full) is dropped, never printed with a traceback.
    logging.raiseExceptions = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("benchd")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    return JsonLog(root, wall)
