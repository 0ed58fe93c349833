"""Who a connecting process is: a session, the operator, or unplaceable, decided once at
accept from kernel facts, never from a claim (docs/security.md, "Who is who"). The
peer is pinned by its pidfd (SO_PEERPIDFD), else by its start time.
"""

import errno
import os
import signal
import socket
import struct
import time
from dataclasses import dataclass

import trio

from bench_wire.errors import WireError
from benchd.runtime.roster import Roster, Session

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


@dataclass(slots=True, eq=False)
class Peer:
    """The connecting process: its pid and uid, and how it is pinned (pidfd or start)."""

    pid: int
    uid: int
    pidfd: int | None
    start: int | None

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


WALK_LIMIT = 64  # parents read before giving up (unplaceable)
ATTEMPTS = 3  # walks tried when a parent changes under us


class _Retry(Exception):
    """A parent exited or its pid was reused mid-walk: read again."""


def unplaceable(why: str) -> WireError:
    return WireError(
        "unplaceable",
        f"this process {why} and has no valid BENCH_TOKEN: it is neither a session nor "
        "the operator",
    )


class Placer:
    def __init__(self, roster: "Roster", helper_pids: set[int], daemon_pid: int):
        self.roster = roster
        self.helper_pids = helper_pids  # the daemon's own children, acting for the operator
        self.daemon_pid = daemon_pid
        self.own_ns = pid_namespace(daemon_pid)

    def place(self, peer: Peer) -> "Session | None":
        """The peer's session, or None for the operator; raises `unplaceable`."""
        if not peer.same():
            raise unplaceable("exited before it could be placed")
        for _ in range(ATTEMPTS):
            try:
                found = self._place(peer.pid)
            except _Retry:
                continue
            if not peer.same():  # what was read may have been a newcomer's
                raise unplaceable("exited before it could be placed")
            return found
        raise unplaceable("could not be placed (its parents kept changing)")

    def _place(self, pid: int) -> "Session | None":
        ns = pid_namespace(pid)
        s = self._walk(pid, ns)
        if s is not None and s.sandboxed and s.ns is None and ns not in (None, self.own_ns):
            # Learned on first contact (the ancestry just said whose it is): from now on
            # the namespace alone answers for it.
            s.learn_ns(ns)
            self.roster.by_ns[ns] = s
        return s

    def _walk(self, pid: int, ns: int | None) -> "Session | None":
        if ns is not None and ns != self.own_ns:
            s = self.roster.by_ns.get(ns)
            if s is not None:
                if not s.live:
                    raise unplaceable("belongs to a session that has ended")
                return s
            # A namespace of no session's (one nested inside a session's): its ancestry,
            # which the daemon reads in its own namespace, still leads to the session.
        foreign = ns != self.own_ns  # None (gone) counts as foreign: never the operator
        if pid == self.daemon_pid:
            return None
        fields = stat_fields(pid)
        if fields is None:
            raise unplaceable("is gone")
        s = self.roster.by_leader.get(int(fields[SESSION]))
        if s is not None and s.live:
            return s  # the common case: a process in the session's pty
        cur, cur_start = pid, int(fields[START])
        for _ in range(WALK_LIMIT):
            if cur in self.helper_pids and not foreign:
                return None
            s = self.roster.by_leader.get(cur)
            if s is not None:
                if not s.live:
                    raise unplaceable("belongs to a session that has ended")
                return s
            if cur == self.daemon_pid:
                raise unplaceable(
                    "descends from a bench session but has left it (its parent chain was cut)"
                )
            ppid = int(fields[PPID])
            if ppid == 0:
                if foreign:
                    # Another daemon's sandbox (or any namespace we did not make): its
                    # processes cannot leave it, and its ancestry, read in our
                    # namespace, says nothing about who started it there.
                    raise unplaceable(
                        "is in a PID namespace other than the daemon's and of no session"
                    )
                return None  # init: a process of the user's, outside every session
            parent = stat_fields(ppid)
            if parent is None or int(parent[START]) > cur_start:
                raise _Retry
            cur, cur_start, fields = ppid, int(parent[START]), parent
        raise unplaceable(f"has more than {WALK_LIMIT} ancestors")
