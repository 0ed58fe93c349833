"""The state directory taken for one daemon: resolved, checked as safe, and locked.

One daemon per directory: the lock is an flock on `benchd.lock` (opened without
following a link), held for the daemon's life and released by the kernel when it exits,
however it exits; the file holds the pid for people to read. Every refusal is one line
on stderr and an exit code (2: unusable, 1: already served).

`python -m benchd.server.lockdir DIR` is the same check, run by `bench up` (`main`).
"""

import fcntl
import os
import sys

from bench_wire.errors import WireError
from bench_wire.paths import resolve_dir, socket_path
from benchd.runtime.system import ensure_private_dir
from benchd.store.fileio import write_all
from benchd.store.statedir import UnsafeStateDir, check_state_dir


def take_state_dir(wanted: str | None) -> str | int:
    """The state directory, checked and locked; or the exit code after saying why."""
    bench_dir = None
    try:
        bench_dir = resolve_dir(wanted)
        socket_path(bench_dir)
    except WireError as err:
        print(f"benchd: {err.message}", file=sys.stderr)
        return 2
    problem = directory_problem(bench_dir, wanted or bench_dir)
    if problem is not None:
        print(f"benchd: {problem}", file=sys.stderr)
        return 2
    try:
        lock_fd = os.open(
            os.path.join(bench_dir, "benchd.lock"),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
    except OSError as err:
        print(f"benchd: cannot use {wanted or bench_dir}: {err}", file=sys.stderr)
        return 2
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"benchd: another benchd already serves {bench_dir}", file=sys.stderr)
        return 1
    os.ftruncate(lock_fd, 0)
    write_all(lock_fd, f"{os.getpid()}\n".encode())
    return bench_dir  # the fd stays open (and locked) until the process ends


def directory_problem(bench_dir: str, shown: str | None = None) -> str | None:
    """Why `bench_dir` cannot be used (made 0700 if it can), in one line; or None.
    The daemon's start and `bench up`'s check (benchd.server.lockdir) both ask it."""
    try:
        ensure_private_dir(bench_dir)
        check_state_dir(bench_dir)
    except UnsafeStateDir as err:
        return f"unsafe BENCH_DIR: {err}"
    except OSError as err:
        return f"cannot use {shown or bench_dir}: {err}"
    return None


# `python -m benchd.server.lockdir DIR`: what `bench up` runs before it writes there.
#
# It makes BENCH_DIR (0700) and checks it exactly as the daemon will at its start
# (`benchd/store/statedir.py`), so that `bench up` refuses an unsafe directory in one
# line before it creates `benchd.out` in it, without importing the daemon: the clients
# import nothing of benchd (`tests/unit/test_layers.py` holds that). Exit 0 when the
# directory may be used; exit 2 with the reason in one line on stderr when not.


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m benchd.server.lockdir BENCH_DIR", file=sys.stderr)
        return 2
    problem = directory_problem(args[0])
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
