"""The OS calls the daemon makes that tests may want to see or that need care."""

import os
import socket
import struct
from collections.abc import Iterator

import trio


def peer_credentials(sock: socket.socket | trio.socket.SocketType) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
    return stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, session, ...


def process_session_id(pid: int) -> int | None:
    """The session id (setsid) of a process, from /proc; None if it is gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[3]) if fields else None
    except (IndexError, ValueError):
        return None


def process_ancestors(pid: int, limit: int = 64) -> Iterator[int]:
    """The parent, grandparent, ... of a process (from /proc), up to init or `limit`."""
    for _ in range(limit):
        fields = _stat_fields(pid)
        try:
            pid = int(fields[1]) if fields else 0
        except (IndexError, ValueError):
            return
        if pid <= 1:
            return
        yield pid


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
