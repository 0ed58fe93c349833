"""The request handlers, one module per area, and the one registry the daemon dispatches
through. A handler is a module's public async function (a `benchd.server.wiring.Handler`)
and handles the request type its `req` parameter names (each type of a union). Who may
call a handler was checked before, in one place (benchd.core.authority.check); that every
request type has exactly one handler, tests/unit/test_handlers.py holds.
"""

import inspect
import typing
from types import ModuleType

from bench_wire import messages as m
from benchd.server.handlers import admin, bridge, mail, ptys
from benchd.server.wiring import Handlers

MODULES = (admin, mail, ptys, bridge)


def handlers_of(module: ModuleType) -> Handlers:
    """Each request type `module` handles, with its handler."""
    out: Handlers = {}
    for name, fn in vars(module).items():
        if name.startswith("_") or not inspect.iscoroutinefunction(fn):
            continue
        req = inspect.get_annotations(fn).get("req")
        for t in typing.get_args(req) or (req,):
            if isinstance(t, type) and issubclass(t, m.Request):
                out[t] = fn
    return out


HANDLERS: Handlers = {t: h for module in MODULES for t, h in handlers_of(module).items()}
