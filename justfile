# bench: tasks. `./run <recipe>` sets up the venv first; inside it, `just <recipe>`.

set shell := ["bash", "-uc"]

py := justfile_directory() / ".venv/bin/python"
export PATH := justfile_directory() / ".venv/bin:" + env_var("PATH")

default:
    @just --list

# The whole test suite (unit + conformance, real daemon and CLI processes), in worker
# processes (BENCH_TEST_WORKERS, default 4: the tests mostly wait on processes); ends
# with the check that nothing was left running or on disk. `just test -n 0`: one process.
test *ARGS:
    {{py}} -m pytest -q -n "${BENCH_TEST_WORKERS:-4}" --dist worksteal {{ARGS}}

# The suite without the tests marked slow (proofs, real agents, crash loops, load): the inner loop.
test-fast *ARGS:
    {{py}} -m pytest -q -n "${BENCH_TEST_WORKERS:-4}" --dist worksteal -m "not slow" {{ARGS}}

# Lint and format check.
lint:
    {{py}} -m ruff check .
    {{py}} -m ruff format --check .

# Type check with mypy (strict on every product package: bench_wire, benchd, bench_cli,
# bench_mcp, bench_bridge; settings in pyproject.toml).
typecheck:
    {{py}} -m mypy

# The ring demo: three stand-in agents pass a number around as mail, 100 -> 103.
mail-proof *ARGS:
    {{py}} -m tools.proofs.mail_proof {{ARGS}}

# The ring through real Claude Code, Codex and pi TUIs (--via mcp: through bench mcp, no shell).
mail-proof-real *ARGS:
    {{py}} -m tools.proofs.mail_proof --agents claude,codex,pi {{ARGS}}

# An agent delegates: alice spawns two jobs from her own session, gets one reply each, combines them.
delegate-proof *ARGS:
    {{py}} -m tools.proofs.delegate_proof {{ARGS}}

# The same with alice a real Claude Code (--real codex: Codex) against the local model server.
delegate-proof-real *ARGS:
    {{py}} -m tools.proofs.delegate_proof --real {{ARGS}}

# The ring across two nodes over NATS JetStream: alice, bob on node1, carol on node2, 100 -> 103.
bridge-proof *ARGS:
    {{py}} -m tools.proofs.bridge_proof {{ARGS}}

# Attack a fresh daemon from inside its sessions as a prompt-injected agent would; prints the
# figures, exits 1 if any attack succeeds (about 2.5 minutes; `--seconds 15` shortens the churn).
hostile-trial *ARGS:
    {{py}} -m tools.proofs.hostile_trial {{ARGS}}

# A short end-to-end check of a daemon (starts one if none answers on $BENCH_DIR).
live-smoke:
    {{py}} -m tools.proofs.live_smoke

# All benchmarks, with their targets (docs/performance.md; under 15 minutes).
bench:
    {{py}} -m tools.perf.run

# Every benchmark at CI size (seconds each).
bench-quick:
    {{py}} -m tools.perf.run --quick

# Long crash/soak run (bounded in time; prints its figures). `just soak 300 --damage`
# also flips a byte of a committed journal record at every kill.
soak SECONDS="300" *ARGS:
    {{py}} -m tools.reliability.soak --seconds {{SECONDS}} {{ARGS}}

# Regenerate the docs written from the code: docs/protocol.md (from the msgspec types)
# and docs/cli.md's options table (from bench_wire/config.py).
docs:
    {{py}} -m tools.docgen

# Remake docs/dash.png (the README's picture) from the dashboard's snapshot SVG.
dash-screenshot:
    {{py}} -m tests.dash.screenshot
