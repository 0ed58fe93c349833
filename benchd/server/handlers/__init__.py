"""The request handlers, one module per area, and the one registry the daemon dispatches
through.

Every handler is a `benchd.server.services.Handler`:
`async def verb(svc: Services, conn: Connection, caller: Caller, req: m.Verb) -> None`:
the daemon's services (the typed record, never the daemon itself), the connection to
answer on, who is asking, and the decoded request. It sends its answer(s) on the
connection or raises a WireError. Who may call it was checked before, in one place
(benchd.core.authority.check).

To add a verb: its types in bench_wire.messages, its row in the permission matrix, a
handler in the module of its area, and an entry in that module's HANDLERS.
"""

from collections.abc import Awaitable, Callable, Iterable
from types import ModuleType
from typing import Any

from benchd.core.caller import Caller
from benchd.server.connection import Connection
from benchd.server.handlers import admin, bridge, events, jobs, mail, sessions
from benchd.server.services import Handler, Handlers, Services

MODULES = (admin, mail, sessions, jobs, events, bridge)
# The bridge's handlers still take the daemon object (Services.daemon); they are
# adapted here, so the registry's every entry has the one signature.
THROUGH_DAEMON = frozenset({bridge})


def _through_daemon(fn: Callable[[Any, Connection, Caller, Any], Awaitable[None]]) -> Handler[Any]:
    async def handler(svc: Services, conn: Connection, caller: Caller, req: Any) -> None:
        await fn(svc.daemon, conn, caller, req)

    return handler


def registry(modules: Iterable[ModuleType] = MODULES) -> Handlers:
    """Request type -> handler, from every handler module (a verb has one handler)."""
    out: Handlers = {}
    for module in modules:
        table: Handlers = module.HANDLERS
        if module in THROUGH_DAEMON:
            table = {t: _through_daemon(fn) for t, fn in table.items()}
        twice = out.keys() & table.keys()
        if twice:
            names = sorted(str(t.__struct_config__.tag) for t in twice)
            raise RuntimeError(f"{module.__name__} handles verbs already handled: {names}")
        out.update(table)
    return out


HANDLERS = registry()
