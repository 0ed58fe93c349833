"""Who may do what: the permission matrix, enforced here and nowhere else.

Every request passes `check(caller, req)` before its handler runs. The caller is the
operator (a process of the daemon's user outside every session) or a session (by its
BENCH_TOKEN or its process ancestry); see the README's "Identity and threat model".

| verb                                   | operator | a session               |
| -------------------------------------- | -------- | ----------------------- |
| hello, mail/send, events, session/list | yes      | yes                     |
| bridge/nodes (`bench nodes`)           | yes      | yes                     |
| mail/list, mail/read, mail/search      | any box  | its own box only        |
| mail/thread, mail/reply                | any      | mail it received (thread: or sent) |
| session/tail (also --screen)           | any      | itself only             |
| session/kill                           | any      | itself only, no cancel  |
| session/spawn, session/type, attach    | yes      | no                      |
| session/screen (`bench dash`)          | yes      | no                      |
| session/prune (`bench ps --prune`)     | yes      | no                      |
| stop, debug/fault                      | yes      | no                      |
| bridge/pull, forwarded, deliver, report, bounce | yes (the bridge runs as the operator) | no |
| job/report                             | no       | itself (a job's session) |

A session may not cancel its own job: cancelling owes the job's correspondents nothing,
so only the operator, who decided to give the task, may take it back.
"""

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.caller import Caller

ANYONE = (
    m.Hello,
    m.MailSend,
    m.EventsRead,
    m.SessionList,
    m.JobReport,
    m.SessionInput,
    m.SessionResize,
    m.SessionDetach,
    m.NodesRead,
    # Which messages a thread or a reply may touch depends on where they are: the
    # handlers answer no-such-message for mail a session did not receive (or send).
    m.MailThread,
    m.MailReply,
)
OPERATOR_ONLY = {
    m.Stop: "stop the daemon",
    m.Spawn: "spawn sessions",
    m.SessionType: "type into a session",
    m.SessionAttach: "attach to a session",
    m.SessionScreen: "watch a session's screen",
    m.SessionPrune: "forget exited sessions",
    m.DebugFault: "inject faults",
    m.BridgePull: "use the bridge's verbs (the bridge runs as the operator)",
    m.BridgeForward: "use the bridge's verbs (the bridge runs as the operator)",
    m.BridgeDeliver: "use the bridge's verbs (the bridge runs as the operator)",
    m.BridgeReport: "use the bridge's verbs (the bridge runs as the operator)",
    m.BridgeBounce: "use the bridge's verbs (the bridge runs as the operator)",
}


def _is_self(caller: Caller, name: str) -> bool:
    return name == caller.handle or name == caller.session.id


def check(caller: Caller, req: m.Request) -> None:
    """Raise `forbidden` unless the matrix above allows `req` for `caller`."""
    if caller.is_operator or isinstance(req, ANYONE):
        return
    what = OPERATOR_ONLY.get(type(req))
    if what is not None:
        raise WireError("forbidden", f"only the operator may {what}; a session may not")
    if isinstance(req, (m.MailList, m.MailRead)):
        if req.handle is not None and req.handle != caller.handle:
            raise WireError(
                "forbidden",
                f"a session reads only its own mailbox ({caller.handle}), not {req.handle}",
            )
        return
    if isinstance(req, m.MailSearch):
        if req.handle is not None and req.handle != caller.handle:
            raise WireError(
                "forbidden",
                f"a session searches only its own mail ({caller.handle}), not {req.handle}",
            )
        return
    if isinstance(req, m.SessionTail):
        if not _is_self(caller, req.handle):
            raise WireError(
                "forbidden",
                f"a session may tail only itself ({caller.handle}), "
                f"not {req.handle}: that is the operator's",
            )
        return
    if isinstance(req, m.SessionKill):
        if not _is_self(caller, req.handle):
            raise WireError("forbidden", "a session may end only itself")
        if req.cancel:
            raise WireError(
                "forbidden",
                "only the operator may cancel a job; a session may end "
                "itself (its job then settles with its exit)",
            )
        return
    raise WireError("forbidden", f"{req.__struct_config__.tag} is the operator's")
