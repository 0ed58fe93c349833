"""bench_wire: the types and framing shared by the bench CLI and the benchd daemon.

Kept import-light on purpose: importing the package imports nothing; each module is
imported where it is needed (the CLI's fast path uses only `client`, `clientproto`, `errors` and `verbs`).
"""
