"""The handler registry (benchd/server/handlers): every request type of the protocol has
exactly one handler, and no module handles a verb another module handles too."""

from bench_wire import messages as m
from benchd.server import handlers


def test_every_request_type_has_exactly_one_handler():
    owners: dict[type, list[str]] = {t: [] for t in m.REQUEST_TYPES}
    for module in handlers.MODULES:
        for t in handlers.handlers_of(module):
            owners.setdefault(t, []).append(module.__name__)
    unhandled = sorted(t.__name__ for t, who in owners.items() if not who)
    twice = {t.__name__: who for t, who in owners.items() if len(who) > 1}
    strangers = sorted(t.__name__ for t in owners if t not in m.REQUEST_TYPES)
    assert (unhandled, twice, strangers) == ([], {}, [])
    assert set(handlers.HANDLERS) == set(m.REQUEST_TYPES)
