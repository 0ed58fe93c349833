"""The request handlers, one module per area, and the one registry the daemon dispatches
through.

Every handler has one signature, `async def verb(d, conn, caller, req) -> None`: the
daemon (its services: `d.mailroom`, `d.roster`, `d.sessions`, `d.jobs`, `d.outbound`,
`d.hub`, `d.index`, `d.committer`, ...), the connection to answer on, who is asking,
and the decoded request. It sends its answer(s) on the connection or raises a WireError.
Who may call it was checked before, in one place (benchd.core.authority.check).

To add a verb: its types in bench_wire.messages, its row in the permission matrix, a
handler in the module of its area, and an entry in that module's HANDLERS.
"""

from benchd.server.handlers import admin, bridge, events, jobs, mail, sessions

MODULES = (admin, mail, sessions, jobs, events, bridge)


def registry() -> dict:
    """Request type -> handler, from every handler module (a verb has one handler)."""
    out: dict = {}
    for module in MODULES:
        twice = out.keys() & module.HANDLERS.keys()
        if twice:
            names = sorted(t.__struct_config__.tag for t in twice)
            raise RuntimeError(f"{module.__name__} handles verbs already handled: {names}")
        out.update(module.HANDLERS)
    return out


HANDLERS = registry()
