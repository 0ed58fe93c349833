"""The process at the other end of a connection, pinned at accept so it cannot be swapped.

The kernel records the connecting process when it calls connect(). SO_PEERCRED gives its
pid, and SO_PEERPIDFD (Linux 6.5+) a pidfd that names that very process, not whatever
later reuses the number. Everything the daemon reads about the peer (/proc/<pid>/stat,
its PID namespace) is read first and trusted only if afterwards the pidfd still names a
live process: a process that has been reaped frees its pid, and the pidfd then answers
ESRCH, so a read that might have seen a newcomer with the same pid is thrown away.

Without SO_PEERPIDFD the start time stands in for it: the peer's start time (from
/proc/<pid>/stat) is read at accept and must not lie after the accept, and reads are
trusted only if the start time is the same afterwards. That leaves a narrow window
between connect() and accept() that only the pidfd closes; the daemon logs which one it
has (`Peer.pinned`).
"""

import errno
import os
import signal
import socket
import struct
import time

import trio

SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux's number; Python 3.13+ names it
_TICKS = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat from field 3 (state) on, or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
    return stat[stat.rfind(b")") + 2 :].split()


# Indices into stat_fields(): field N of proc(5) is at N - 3.
PPID, SESSION, START = 1, 3, 19


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None if it is gone."""
    fields = stat_fields(pid)
    try:
        return int(fields[START]) if fields else None
    except (IndexError, ValueError):
        return None


def pid_namespace(pid: int) -> int | None:
    """The inode of the PID namespace the process is in, or None if it is gone."""
    try:
        link = os.readlink(f"/proc/{pid}/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    try:
        return int(link[link.index("[") + 1 : -1])
    except ValueError:
        return None


class Peer:
    """The connecting process: its pid and uid, and how it is pinned (pidfd or start)."""

    __slots__ = ("pid", "pidfd", "start", "uid")

    def __init__(self, pid: int, uid: int, pidfd: int | None, start: int | None):
        self.pid = pid
        self.uid = uid
        self.pidfd = pidfd
        self.start = start

    @property
    def pinned(self) -> str:
        return "pidfd" if self.pidfd is not None else "start-time"

    def same(self) -> bool:
        """True while the pid still names the process that connected (it may have exited
        but not yet been reaped: its /proc entry is then still its own)."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True  # it exists (a setuid program): the uid check refuses it
            return True
        return self.start is not None and start_time(self.pid) == self.start

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def peer_of(sock: socket.socket | trio.socket.SocketType) -> Peer:
    """The process at the other end of a Unix socket, pinned. Raises OSError."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    pidfd: int | None = None
    try:
        pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError as err:
        if err.errno == errno.ESRCH:  # it has exited and been reaped already
            return Peer(pid, uid, None, None)
        pidfd = None  # an older kernel: the start time stands in
    start = None
    if pidfd is None:
        accepted = int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS) + 1
        start = start_time(pid)
        if start is not None and start > accepted:
            start = None  # started after the accept: not the process that connected
    return Peer(pid, uid, pidfd, start)
