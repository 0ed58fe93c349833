"""The request handlers, one module per area (each a `benchd.server.wiring.Handler`, in
its module's HANDLERS), and the one registry the daemon dispatches through. Who may call
a handler was checked before, in one place (benchd.core.authority.check); that every
request type has exactly one handler, tests/unit/test_handlers.py holds.
"""

from benchd.server.handlers import admin, bridge, mail, ptys
from benchd.server.wiring import Handlers

MODULES = (admin, mail, ptys, bridge)
HANDLERS: Handlers = {t: h for module in MODULES for t, h in module.HANDLERS.items()}
