"""The request handlers, one module per area, and the one registry the daemon dispatches
through.

Every handler is a `benchd.server.wiring.Handler`:
`async def verb(svc: Services, conn: Connection, caller: Caller, req: m.Verb) -> None`:
the daemon's services (the typed record, never the daemon itself), the connection to
answer on, who is asking, and the decoded request. It sends its answer(s) on the
connection or raises a WireError. Who may call it was checked before, in one place
(benchd.core.authority.check).

To add a verb: its types in bench_wire.messages, its row in the permission matrix, a
handler in the module of its area, and an entry in that module's HANDLERS.
"""

from collections.abc import Iterable
from types import ModuleType

from benchd.server.handlers import admin, bridge, mail, ptys
from benchd.server.wiring import Handlers

MODULES = (admin, mail, ptys, bridge)


def registry(modules: Iterable[ModuleType] = MODULES) -> Handlers:
    """Request type -> handler, from every handler module (a verb has one handler)."""
    out: Handlers = {}
    for module in modules:
        table: Handlers = module.HANDLERS
        twice = out.keys() & table.keys()
        if twice:
            names = sorted(str(t.__struct_config__.tag) for t in twice)
            raise RuntimeError(f"{module.__name__} handles verbs already handled: {names}")
        out.update(table)
    return out


HANDLERS = registry()
