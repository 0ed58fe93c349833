"""bench_wire: the types and framing shared by the bench CLI and the benchd daemon.
Importing the package imports nothing: the CLI's fast path takes only the modules it needs.
"""
