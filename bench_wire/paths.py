"""BENCH_DIR and socket-path resolution (no heavy imports: the CLI's fast path uses it)."""

import os
import stat  # loaded by os already

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
    """--dir, else $BENCH_DIR, else the per-user default; always absolute. An empty --dir
    is refused: it is a mistake (an unset variable, say), not a wish for the default."""
    if flag == "":
        raise WireError(
            "usage",
            "--dir is empty: give a directory, or leave --dir out to use $BENCH_DIR "
            "(else ~/.local/state/bench)",
        )
    d = flag or os.environ.get("BENCH_DIR") or default_dir()
    return os.path.abspath(os.path.expanduser(d))


# Why a directory could not be made, in words (the errno name otherwise).
_CANNOT = {
    "EACCES": "you may not write there",
    "EPERM": "you may not write there",
    "EROFS": "it is on a read-only file system",
    "ENOSPC": "the disk is full",
    "EDQUOT": "your disk quota is used up",
    # /proc and /sys answer ENOENT to a mkdir: they make their own entries only.
    "ENOENT": "that file system does not allow new directories",
}


def dir_problem(bench_dir: str, err: OSError | None = None) -> WireError | None:
    """`bad-dir` naming what is wrong with BENCH_DIR as a place for a directory: it, or a
    directory above it, is a file; or it is missing and cannot be made (`err`, from the
    attempt). None when nothing of the sort is wrong."""
    path = bench_dir
    while True:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            continue
        except OSError:
            return None  # unreadable above: the daemon's own checks say what they find
        break
    if not stat.S_ISDIR(st.st_mode):
        if path == bench_dir:
            why = "give --dir a directory (bench up makes a missing one)"
        else:
            why = f"BENCH_DIR {bench_dir} cannot be made under it"
        return WireError("bad-dir", f"{path} is a file, not a directory: {why}")
    if path == bench_dir or err is None:
        return None
    import errno  # only on this error path

    name = errno.errorcode.get(err.errno or 0, "")
    why = _CANNOT.get(name) or f"{name or 'the system'} refused it"
    return WireError(
        "bad-dir",
        f"BENCH_DIR {bench_dir} does not exist and cannot be made in {path}: {why}",
    )


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
