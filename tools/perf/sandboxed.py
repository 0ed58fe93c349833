"""cli-send-sandboxed: `bench mail send` as an agent runs it, from inside a sandboxed session.

cli-send times the CLI from the operator's shell; an agent runs it inside its session's
sandbox (bwrap: its own PID namespace, /proc and view of BENCH_DIR), where the process
starts, imports and connects as the session. A session's program (stdlib only, below)
alternates N timed `bench mail send` processes with N of the same interpreter's
`-c pass`, both started from inside the same sandbox, and writes the wall times to a
scratch directory outside BENCH_DIR; the figure is the sends' median over the floor's.
"""

import json
import os

from bench_wire.errors import WireError
from tools.perf.harness import (
    BENCH,
    PY,
    Context,
    Daemon,
    Result,
    call,
    median,
    ms,
    percentile,
    poll,
)

# Runs as the session's program: argv OUT RUNS WARM BENCH PY.
TIMER = r"""
import json, os, subprocess, sys, time
out, runs, warm, bench, py = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
send, floor = [bench, "mail", "send", "x", "-m", "y"], [py, "-c", "pass"]

def wall(cmd):
    t0 = time.perf_counter_ns()
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t = time.perf_counter_ns() - t0
    if p.returncode != 0:
        raise SystemExit(f"{cmd} exited {p.returncode}: {p.stderr[-500:]!r}")
    return t

try:
    for _ in range(warm):
        wall(floor)
        wall(send)
    got = {"send": [], "floor": [], "pids_seen": sum(n.isdigit() for n in os.listdir("/proc"))}
    for _ in range(runs):  # alternate, so drift hits both alike
        got["floor"].append(wall(floor))
        got["send"].append(wall(send))
except SystemExit as err:
    got = {"error": str(err)}
with open(out + ".tmp", "w") as f:
    json.dump(got, f)
os.rename(out + ".tmp", out)
"""


def cli_send_sandboxed(ctx: Context) -> list[Result]:
    runs = ctx.size(20, 60)
    warm = 5
    d = ctx.tmpdir("cs")
    scratch = ctx.tmpdir("cx")  # outside BENCH_DIR: the session writes its timings here
    script = os.path.join(scratch, "timer.py")
    with open(script, "w") as f:
        f.write(TIMER)
    out = os.path.join(scratch, "times.json")
    with Daemon(d) as daemon:
        conn = daemon.connect()
        caps = call(conn, "hello")["caps"]
        if caps.get("isolation") != "on":
            raise RuntimeError(f"the sandbox cannot run here: {caps.get('isolation_note')}")
        call(
            conn,
            "session/spawn",
            argv=[PY, script, out, str(runs), str(warm), BENCH, PY],
            name="timer",
            cwd=scratch,
        )
        poll(lambda: os.path.exists(out), 60 + runs * 10, "the session's timings")
        try:
            call(conn, "session/kill", handle="timer")
        except WireError as err:
            if err.code != "no-such-session":
                raise  # else its program has written its timings and ended on its own
        conn.close()
    with open(out) as f:
        got = json.load(f)
    if "error" in got:
        raise RuntimeError(f"inside the sandbox: {got['error']}")
    b, fl = median(got["send"]), median(got["floor"])
    return [
        Result(
            "cli-send-sandboxed",
            "ms",
            ms(b),
            ms(fl),
            b / fl,
            "<=",
            1.3,
            params={
                "runs": runs,
                "warmup": warm,
                "stat": "median wall time per process, both started inside one sandboxed session",
                "command": "bench mail send x -m y",
                "floor": f"{PY} -c pass",
                "bench_p90_ms": ms(percentile(got["send"], 90)),
                "floor_p90_ms": ms(percentile(got["floor"], 90)),
                "processes_visible": got["pids_seen"],
            },
        )
    ]
