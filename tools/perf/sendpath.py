"""How many of the product's modules a send runs through: `python -m tools.perf.sendpath`.

Counts the modules (files of bench_wire, benchd, bench_cli, ...) whose code runs:
- argv to durable: in the `bench mail send` process (its imports and calls), plus in the
  daemon from before the request to its acknowledgement (the mail durable);
- to the wake line: in the daemon from that send to the recipient's `agent/woken`
  (the recipient a stand-in agent at its prompt: the idle gate, the reactor, the pty).
A profile hook (sys.setprofile, in a sitecustomize put on PYTHONPATH) records each
function call's file; the daemon writes and clears its set on SIGUSR1. Periodic work
that happens to run inside a window (upkeep ticks) is counted too: the figures are an
upper bound of the path, for comparing trees, not a timing.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from tools.perf.harness import PY, ROOT, clean_env, poll

PACKAGES = ("bench_wire", "benchd", "bench_cli", "bench_mcp", "bench_bridge")

SITECUSTOMIZE = """
import os, signal, sys, threading
_out = os.environ.get("BENCH_TRACE_FILE")
if _out:
    _seen = set()
    def _profile(frame, event, arg):
        if event == "call":
            _seen.add(frame.f_code.co_filename)
    def _dump(*_):
        with open(_out, "a") as f:
            f.write(json.dumps(sorted(_seen)) + "\\n")
        _seen.clear()
    import json
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    if os.environ.get("BENCH_TRACE_SIGNAL"):
        signal.signal(signal.SIGUSR1, _dump)
    else:
        import atexit
        atexit.register(_dump)
"""


def product(files: list[str]) -> list[str]:
    out = set()
    for f in files:
        rel = os.path.relpath(f, ROOT)
        if rel.split(os.sep)[0] in PACKAGES and rel.endswith(".py"):
            out.add(rel)
    return sorted(out)


def main() -> int:
    work = tempfile.mkdtemp(prefix="bench-path-")
    d = os.path.join(work, "dir")
    site = os.path.join(work, "site")
    os.makedirs(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    dtrace = os.path.join(work, "daemon.jsonl")
    env = dict(clean_env(d), PYTHONPATH=f"{site}:{ROOT}")
    denv = dict(env, BENCH_TRACE_FILE=dtrace, BENCH_TRACE_SIGNAL="1")
    daemon = subprocess.Popen(
        [PY, "-m", "benchd.server.app", "--dir", d, "--idle-gate", "0.3"],
        env=denv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert daemon.stdout is not None
    daemon.stdout.readline()  # benchd ready ...

    def bench(*args: str, **extra: str) -> dict:
        out = subprocess.run(
            [PY, "-c", "import sys; from bench_cli.entry import main; sys.exit(main(False))"]
            + with_json(list(args)),
            env=dict(env, **extra),
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def lines() -> int:
        if not os.path.exists(dtrace):
            return 0
        with open(dtrace) as f:
            return sum(1 for _ in f)

    def window() -> list[str]:
        n = lines()
        daemon.send_signal(signal.SIGUSR1)
        poll(lambda: lines() > n, 10, "the daemon's trace")
        with open(dtrace) as f:
            return product(json.loads(f.readlines()[-1]))

    try:
        standin = os.path.join(ROOT, "tests", "standin", "standin.py")
        bench("spawn", "--name", "ana", "--ready", "standin>", "--", PY, standin)
        bench("mail", "send", "box", "-m", "warm up")  # first-send costs (mailbox made)
        time.sleep(1.0)  # the session at its prompt past the idle gate
        window()  # clears the daemon's set
        ctrace = os.path.join(work, "cli.jsonl")
        bench("mail", "send", "box", "-m", "hello", BENCH_TRACE_FILE=ctrace)
        daemon_send = window()
        with open(ctrace) as f:
            cli = product(json.loads(f.readline()))
        sent = bench("mail", "send", "ana", "-m", "wake up")
        # Polled on disk, not through the daemon (a request would add its own modules).
        read = os.path.join(d, "mail", "ana", "read", sent["mail_id"] + ".md")
        poll(lambda: os.path.exists(read), 30, "the wake (the mail moved to read/)")
        wake = window()
    finally:
        daemon.terminate()
        daemon.wait(30)
    durable = sorted(set(cli) | set(daemon_send))
    print(
        f"argv -> durable: {len(durable)} modules ({len(cli)} in the CLI, {len(daemon_send)} in the daemon)"
    )
    print("  cli:    " + " ".join(m.removesuffix(".py") for m in cli))
    print("  daemon: " + " ".join(m.removesuffix(".py") for m in daemon_send))
    to_wake = sorted(set(durable) | set(wake))
    print(
        f"argv -> wake line: {len(to_wake)} modules (the daemon from the send to agent/woken: {len(wake)})"
    )
    print("  daemon: " + " ".join(m.removesuffix(".py") for m in wake))
    return 0


def with_json(args: list[str]) -> list[str]:
    at = args.index("--") if "--" in args else len(args)
    return [*args[:at], "--json", *args[at:]]


if __name__ == "__main__":
    sys.exit(main())
