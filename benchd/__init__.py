"""benchd: the bench daemon (mailroom, event log, sessions, wake reactor, jobs).

Four layers; a module imports only from its own layer and the layers above it in this
list (and from `bench_wire`, the types it shares with the CLI):

- `benchd.core`: pure logic, no I/O: handles and ids, key rules, front matter, the token bucket,
  what a job owes, the wake gate, the permission matrix, connection admission.
  No trio, no sockets, no files: tested in-process (`tests/unit/test_layers.py` holds
  the rule).
- `benchd.store`: what lives on disk: the event log, the mail index and its search
  tables, the jobs' records, start-up recovery, the state directory's checks, the SQLite
  and file-writing helpers (with the test faults).
- `benchd.runtime`: the running parts, on trio: the committer (durable writes), the
  mailroom, the hub and its bounded broadcast, terminals and sessions, the wake reactor, the job host, the
  outbound queue and the bridge's supervisor.
- `benchd.server`: the process: entry point and wiring (`app`), connections, the
  request handlers, the daemon's own log.

So `core` imports nothing of benchd; `store` imports `core`; `runtime` imports `core`
and `store`; `server` imports all of them. ARCHITECTURE.md traces a request through.
"""

__version__ = "0.1.0"
