"""The request handlers, one module per area (each a `benchd.server.wiring.Handler`, in
its module's HANDLERS), and the one registry the daemon dispatches through. Who may call
a handler was checked before, in one place (benchd.core.authority.check).
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
