"""benchd: the bench daemon (mailroom, event log, sessions, wake reactor, jobs).

Four layers, each importing only from itself, those before it and `bench_wire`: `core`
(pure logic, no I/O), `store` (what lives on disk), `runtime` (the running parts, on
trio), `server` (the process: start-up, wiring, connections, handlers). ARCHITECTURE.md
traces a request through them; tests/unit/test_layers.py holds the rule.
"""

__version__ = "0.1.0"
