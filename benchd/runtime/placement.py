"""Who a connecting process is: a session, the operator, or unplaceable. Decided once, at
accept, from kernel facts read race-free (benchd.runtime.peers), never from a claim.

In order:

1. A process in a sandboxed session's PID namespace is that session. It cannot leave
   the namespace (setsid, double forks and re-parenting change nothing) and it dies
   with the session, so this answer cannot be escaped.
2. Otherwise the process's ancestry: the first pty leader of a live session on its
   parent chain makes it that session; a helper the daemon runs for the operator (the
   bridge) makes it the operator; reaching the daemon itself makes it `unplaceable`
   (it descends from a session it has left: the daemon is the subreaper of its
   sessions' processes, so a cut parent chain ends at the daemon, never at init);
   reaching init without any of these makes it the operator, but only for a process
   in the daemon's own PID namespace: one in any other namespace (another daemon's
   session, a container) that reaches no session of ours is `unplaceable`, never the
   operator, whatever its ancestry says.
3. Each parent read is checked against its child's start time (a parent cannot start
   after its child: a reused pid can), and the whole walk is trusted only if the peer
   is still the process that connected afterwards. A walk that cannot be read steadily,
   or a peer that is gone, is `unplaceable`, never the operator.
"""

from bench_wire.errors import WireError
from benchd.runtime.peers import PPID, SESSION, START, Peer, pid_namespace, stat_fields
from benchd.runtime.roster import Roster, Session

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
