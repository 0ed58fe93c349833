"""BENCH_DIR and socket-path resolution (no heavy imports: the CLI's fast path uses it)."""

import os

from bench_wire.errors import WireError

# Linux's sockaddr_un.sun_path is 108 bytes including the terminating NUL.
SUN_PATH_MAX = 108
SOCKET_NAME = "benchd.sock"


def default_dir() -> str:
    """The per-user default: $XDG_STATE_HOME/bench, else ~/.local/state/bench."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "bench")


def resolve_dir(flag: str | None = None) -> str:
    """--dir, else $BENCH_DIR, else the per-user default; always absolute."""
    d = flag or os.environ.get("BENCH_DIR") or default_dir()
    return os.path.abspath(os.path.expanduser(d))


def socket_path(bench_dir: str) -> str:
    """The daemon's socket path in BENCH_DIR, or a clear error when AF_UNIX cannot hold it."""
    path = os.path.join(bench_dir, SOCKET_NAME)
    n = len(os.fsencode(path))
    if n >= SUN_PATH_MAX:
        raise WireError(
            "socket-path-too-long",
            f"the socket path {path} is {n} bytes; AF_UNIX allows at most "
            f"{SUN_PATH_MAX - 1} on Linux: choose a shorter BENCH_DIR",
        )
    return path
