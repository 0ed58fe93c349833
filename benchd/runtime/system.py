"""The daemon's own process: the OS calls it makes that need care, and its log.

The log is what the runtime needs of it (`Log`: a structlog logger in the daemon, any
object with these methods in a test), and `setup_log`, which points structlog at
BENCH_DIR/benchd.log, one JSON object per line.
"""

import logging
import os
import sys
from collections.abc import Callable
from typing import Protocol

import structlog

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


class Log(Protocol):
    """Events by name, with their context as keywords (structlog's BoundLogger)."""

    def info(self, event: str, **kw: object) -> object: ...

    def warning(self, event: str, **kw: object) -> object: ...

    def error(self, event: str, **kw: object) -> object: ...

    def exception(self, event: str, **kw: object) -> object: ...


def setup_log(path: str) -> structlog.stdlib.BoundLogger:
    # A line the disk refuses (full) is dropped, never printed with a traceback.
    logging.raiseExceptions = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("benchd")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    log: structlog.stdlib.BoundLogger = structlog.get_logger("benchd")
    return log
