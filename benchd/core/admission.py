"""Admission: how many connections each peer may hold, so no one can lock out the rest.

A peer is the operator, one session, or unplaceable (placed once when it connects;
benchd.runtime.placement).
Four limits, each a daemon option:

- `--max-connections` in all;
- `--session-connections` per session, and `OPERATOR_CONNECTIONS` for the operator;
- `--tree-connections` per tree of sessions (a session and the jobs below it, named by
  its root's id: benchd.core.trees), so one tree that delegates cannot take what the
  reserve leaves and shut the other trees out;
- `--operator-reserve`: that many of the total are kept for the operator, so `bench
  status`, `bench down` and the operator's mail work while sessions hog the rest.

Pure bookkeeping (no I/O): `admit` says why a new connection is refused (a `Refused`
naming the budget), or None and counts it; `release` gives it back.
"""

from dataclasses import dataclass

from benchd.core.names import OPERATOR

# The operator's connections at once (--operator-connections until nothing set it: 128
# is half the default total, and the operator's commands hold one or two each).
OPERATOR_CONNECTIONS = 128

# The operator's peer key is its handle: one name for the operator everywhere.
OPERATOR_PEER = OPERATOR


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a connection is refused: the sentence, the budget (total, operator, session,
    tree or sessions: what the reserve leaves them) and its limit."""

    reason: str
    budget: str
    limit: int

    def __str__(self) -> str:
        return self.reason


class Admission:
    def __init__(
        self, total: int, per_session: int, per_operator: int, reserve: int, per_tree: int = 0
    ):
        self.total = total
        self.per_session = per_session
        self.per_operator = per_operator
        self.per_tree = per_tree or total  # 0: no budget per tree (the total is one)
        # Sessions together may hold what the reserve leaves (at least one connection).
        self.sessions_cap = max(1, total - reserve)
        self.held: dict[str, int] = {}
        self.by_tree: dict[str, int] = {}
        self.in_all = 0
        self.by_sessions = 0

    def admit(self, peer: str, tree: str | None = None) -> Refused | None:
        """None (and the connection counted) or why it is refused. `tree`: the root's
        session id of a session's tree (its own id at the top; None: no tree)."""
        mine = self.held.get(peer, 0)
        if self.in_all >= self.total:
            return Refused(
                f"the daemon is at its limit of {self.total} connections", "total", self.total
            )
        if peer == OPERATOR_PEER:
            if mine >= self.per_operator:
                return Refused(
                    f"the operator already holds {mine} connections (the limit)",
                    "operator",
                    self.per_operator,
                )
        else:
            if mine >= self.per_session:
                return Refused(
                    f"session {peer} already holds {mine} connections (the limit per session)",
                    "session",
                    self.per_session,
                )
            ours = self.by_tree.get(tree, 0) if tree is not None else 0
            if tree is not None and ours >= self.per_tree:
                return Refused(
                    f"the tree of sessions under {tree} already holds {ours} connections "
                    "(the limit per tree: a session and the jobs below it)",
                    "tree",
                    self.per_tree,
                )
            if self.by_sessions >= self.sessions_cap:
                return Refused(
                    f"sessions hold {self.by_sessions} connections; the rest are kept "
                    "for the operator",
                    "sessions",
                    self.sessions_cap,
                )
            self.by_sessions += 1
            if tree is not None:
                self.by_tree[tree] = ours + 1
        self.held[peer] = mine + 1
        self.in_all += 1
        return None

    def release(self, peer: str, tree: str | None = None) -> None:
        n = self.held.get(peer, 0) - 1
        if n > 0:
            self.held[peer] = n
        else:
            self.held.pop(peer, None)
        self.in_all -= 1
        if peer != OPERATOR_PEER:
            self.by_sessions -= 1
            if tree is not None:
                t = self.by_tree.get(tree, 0) - 1
                if t > 0:
                    self.by_tree[tree] = t
                else:
                    self.by_tree.pop(tree, None)
