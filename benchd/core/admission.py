"""Admission: how many connections each peer may hold, so no one can lock out the rest.

A peer is the operator, one session, or unplaceable (placed once when it connects;
benchd.runtime.placement).
Three limits, each a daemon option:

- `--max-connections` in all;
- `--session-connections` per session, and `--operator-connections` for the operator;
- `--operator-reserve`: that many of the total are kept for the operator, so `bench
  status`, `bench down` and the operator's mail work while sessions hog the rest.

Pure bookkeeping (no I/O): `admit` says why a new connection is refused, or None and
counts it; `release` gives it back.
"""

from benchd.core.names import OPERATOR

# The operator's peer key is its handle: one name for the operator everywhere.
OPERATOR_PEER = OPERATOR


class Admission:
    def __init__(self, total: int, per_session: int, per_operator: int, reserve: int):
        self.total = total
        self.per_session = per_session
        self.per_operator = per_operator
        # Sessions together may hold what the reserve leaves (at least one connection).
        self.sessions_cap = max(1, total - reserve)
        self.held: dict[str, int] = {}
        self.in_all = 0
        self.by_sessions = 0

    def admit(self, peer: str) -> str | None:
        """None (and the connection counted) or the reason it is refused."""
        mine = self.held.get(peer, 0)
        if self.in_all >= self.total:
            return f"the daemon is at its limit of {self.total} connections"
        if peer == OPERATOR_PEER:
            if mine >= self.per_operator:
                return f"the operator already holds {mine} connections (the limit)"
        else:
            if mine >= self.per_session:
                return f"session {peer} already holds {mine} connections (the limit per session)"
            if self.by_sessions >= self.sessions_cap:
                return (
                    f"sessions hold {self.by_sessions} connections; the rest are kept "
                    "for the operator"
                )
            self.by_sessions += 1
        self.held[peer] = mine + 1
        self.in_all += 1
        return None

    def release(self, peer: str) -> None:
        n = self.held.get(peer, 0) - 1
        if n > 0:
            self.held[peer] = n
        else:
            self.held.pop(peer, None)
        self.in_all -= 1
        if peer != OPERATOR_PEER:
            self.by_sessions -= 1
