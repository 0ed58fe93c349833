"""The benchmarks of docs/performance.md: `python -m tools.perf.run [--quick] [--only NAME,...]`.

- harness.py  temporary daemons, streams, timing statistics, the table and the JSON
- mail.py     cli-send, send-1, send-16 (and the Maildir baseline)
- spawn.py    spawn (sandboxed against unsandboxed session starts)
- scale.py    the shared filled BENCH_DIR; list-scale, send-scale, restart, rss
- agents.py   wake, relay, fanout
- run.py      the command line: selection, order, table, JSON, exit code
"""
