"""Who may do what (the permission matrix of docs/security.md) and how much (admission),
enforced here and nowhere else: every request passes `check(caller, req)` before its
handler runs. Which session a name designates (and its spawners) is the roster's answer,
passed in as `family(name)` -> (its id, its spawner's id, ...), or () for none.

`Admission` (pure bookkeeping) keeps the connections each peer may hold (docs/limits.md):
no one locks out the rest, `--operator-reserve` keeps the operator's commands working
while sessions hog the rest, `--tree-connections` bounds one delegating tree.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.names import OPERATOR
from benchd.core.trees import TreeMember


class CallerSession(TreeMember, Protocol):
    """What is read of a calling session (a benchd.runtime.roster Session): a protocol,
    because the pure core does not import the runtime."""

    @property
    def live(self) -> bool: ...

    @property
    def job(self) -> object: ...


class Caller:
    """Who is speaking: a session (by its secret or its pty) or the operator (derived,
    never claimed)."""

    __slots__ = ("handle", "session")

    def __init__(self, handle: str, session: CallerSession | None = None):
        self.handle = handle
        self.session = session

    @property
    def is_operator(self) -> bool:
        return self.session is None


ANYONE = (
    m.Hello,
    m.MailSend,
    m.EventsRead,
    m.SessionList,
    m.JobReport,
    m.AgentReport,  # the handler refuses the operator: a report is a session's own
    m.SessionInput,
    m.SessionResize,
    m.SessionDetach,
    m.NodesRead,
    # Which messages a thread or a reply may touch depends on where they are: the
    # handlers answer no-such-message for mail a session did not receive (or send).
    m.MailThread,
    m.MailReply,
    # The handlers show a session only the states of mail it sent, and wait only on
    # its own mailbox.
    m.MailSentList,
    m.MailStatus,
    m.MailWait,
)
OPERATOR_ONLY = {
    m.Stop: "stop the daemon",
    m.SessionAttach: "attach to a session",
    m.SessionScreen: "watch a session's screen",
    m.SessionPrune: "forget exited sessions",
    m.DebugFault: "inject faults",
    m.JournalAck: "acknowledge journal damage",
}  # and every bridge/ verb (the bridge runs as the operator)

# What a session may do only to the jobs it started (and theirs); a tail, to itself too.
DESCENDANTS_ONLY: dict[type, str] = {
    m.SessionTail: "tail only itself ({me}) and the jobs it started, not {name}: that is the "
    "operator's",
    m.AgentAnswer: "answer approvals only for the jobs it started (and theirs), not for "
    "{name}: that is the operator's",
    m.SessionType: "type only into the jobs it started (and theirs), not into {name}: that "
    "is the operator's",
    m.JobWait: "wait only on the jobs it started (and theirs), not {name}",
}

Family = Callable[[str], tuple[str, ...]]


def _is_self(caller: Caller, name: str) -> bool:
    s = caller.session
    return name == caller.handle or (s is not None and name == s.id)


def _is_descendant(caller: Caller, name: str, family: Family) -> bool:
    s = caller.session
    return s is not None and s.id in family(name)[1:]


def check(caller: Caller, req: m.Request, family: Family = lambda name: ()) -> None:
    """Raise `forbidden` unless the permission matrix allows `req` for `caller`."""
    if caller.is_operator or isinstance(req, ANYONE):
        return
    if isinstance(req, m.Spawn):
        if not req.sandbox:
            raise WireError(
                "forbidden",
                "only the operator may start a session outside the sandbox (--no-sandbox)",
            )
        if req.job is None:
            raise WireError(
                "forbidden",
                "a session may spawn only jobs (bench spawn --mail TASK ... -- CMD), "
                "not plain sessions: those are the operator's",
            )
        return
    what = OPERATOR_ONLY.get(type(req))
    if what is None and str(req.__struct_config__.tag).startswith("bridge/"):
        what = "use the bridge's verbs (the bridge runs as the operator)"
    if what is not None:
        raise WireError("forbidden", f"a session may not {what}: that is the operator's")
    if isinstance(req, (m.MailList, m.MailRead, m.MailSearch)):
        if req.handle is not None and req.handle != caller.handle:
            search = isinstance(req, m.MailSearch)
            what = "search only its own mail" if search else "read only its own mailbox"
            raise WireError(
                "forbidden",
                f"a session may {what} ({caller.handle}), not {req.handle}'s: that is the "
                "operator's",
            )
        return
    if isinstance(req, (m.SessionTail, m.AgentAnswer, m.SessionType, m.JobWait)):
        name = req.session if isinstance(req, m.JobWait) else req.handle
        itself = isinstance(req, m.SessionTail) and _is_self(caller, name)
        if not (itself or _is_descendant(caller, name, family)):
            said = DESCENDANTS_ONLY[type(req)].format(me=caller.handle, name=name)
            raise WireError("forbidden", f"a session may {said}")
        return
    if isinstance(req, m.SessionKill):
        # A session may not cancel its own job: cancelling owes the job's correspondents
        # nothing, so only whoever gave the task may take it back.
        if _is_descendant(caller, req.handle, family):
            return  # its own delegated work: it may end it, or take it back (cancel)
        if not _is_self(caller, req.handle):
            raise WireError(
                "forbidden",
                f"a session may end only itself ({caller.handle}) and the jobs it "
                f"started (and theirs), not {req.handle}: that is the operator's",
            )
        if req.cancel:
            raise WireError(
                "forbidden",
                "a session may not cancel a job (it may end itself: its job then "
                "settles with its exit): that is the operator's",
            )
        return
    raise WireError(
        "forbidden", f"a session may not use {req.__struct_config__.tag}: that is the operator's"
    )


# The operator's connections at once: half the default total; its commands hold one or
# two each.
OPERATOR_CONNECTIONS = 128


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
        if peer == OPERATOR:
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
        if peer != OPERATOR:
            self.by_sessions -= 1
            if tree is not None:
                t = self.by_tree.get(tree, 0) - 1
                if t > 0:
                    self.by_tree[tree] = t
                else:
                    self.by_tree.pop(tree, None)
