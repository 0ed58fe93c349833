"""The OS calls the daemon makes that tests may want to see or that need care."""

import os
import socket
import struct


def peer_credentials(sock) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


def process_session_id(pid: int) -> int | None:
    """The session id (setsid) of a process, from /proc; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[3])  # state, ppid, pgrp, session
    except (IndexError, ValueError):
        return None


def ensure_private_dir(path: str) -> None:
    """Create BENCH_DIR 0700 (and parents); tighten it to 0700 if it exists and is ours."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)


def read_status_kib(pid: int, field: str) -> int | None:
    """VmRSS / VmHWM etc. from /proc/<pid>/status, in KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
