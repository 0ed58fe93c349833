"""The OS calls the daemon makes that tests may want to see or that need care."""

import os


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux prctl): a process
    that leaves a session and whose parent exits is re-parented to the daemon instead of
    init, so it can still be told apart from the operator's own processes."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def child_pids() -> list[int]:
    """This process's children (the thread that forks them is the main thread)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def reap_zombie(pid: int) -> bool:
    """Collect `pid` if it is a child that has exited; never blocks."""
    try:
        got, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return got == pid


def ensure_private_dir(path: str) -> None:
    """Create BENCH_DIR 0700 (and parents); tighten it to 0700 if it exists and is ours."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)
