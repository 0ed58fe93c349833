"""door, reports and hook: agents that report for themselves (docs/agents.md).

- door: mail/send ack -> the line taken by the agent, for an agent with the claude
  adapter (the hooked stand-in, tests/standin/hooked.py, run as `claude`): idle (typed
  once its own report says idle) and busy (handed over by its Stop hook, counted from
  the end of its turn), beside the screen-based path (the plain stand-in behind the
  idle gate) in the same daemon, samples alternating. Idle samples are taken right
  after the agent's turn ended, for both paths (the common case: work finished, mail
  comes): the screen path waits its idle gate, the adapter its short settle.
- reports: agent/report requests from 16 sessions (threads holding each session's
  token, a persistent connection each), alternating prompt and stop as hooks do; the
  daemon's CPU per report (/proc/PID/stat) and the rate it took them at.
- hook: the hook command as a fresh process (what an agent pays per hook): the compiled
  `bench-hook stop` that adapter sessions run when `./run` built it, and `bench hook
  stop` (Python), beside the interpreter's own start (`python -c pass`), alternating.
"""

import json
import os
import stat
import subprocess
import time

from bench_wire.client import Client
from tests.support.spawn import STANDIN
from tools.perf.harness import (
    BIN,
    PY,
    ROOT,
    Context,
    Daemon,
    Result,
    call,
    clean_env,
    cpu_seconds,
    events_in_log,
    median,
    ms,
    now_ns,
    p99,
    poll,
    run_threads,
)

HOOKED = os.path.join(ROOT, "tests", "standin", "hooked.py")
GATE = 1.0
SETTLE = 0.2
BUSY_TARGET_MS = 100.0
REPORT_TARGET_US = 200.0


def _records(path: str) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def _claude_script(files: str) -> str:
    path = os.path.join(files, "claude")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {PY} {HOOKED} "$@"\n')
    os.chmod(path, stat.S_IRWXU)
    return path


def _states(d: str, handle: str) -> list[str]:
    return [e["state"] for e in events_in_log(d, "agent/state") if e["handle"] == handle]


def door(ctx: Context) -> list[Result]:
    n = ctx.size(5, 15)
    d = ctx.tmpdir("dr")
    files = ctx.tmpdir("drf")  # outside BENCH_DIR: the sessions write their records here
    claude = _claude_script(files)
    opts = ["--idle-gate", str(GATE), "--paste-settle", str(SETTLE)]
    opts += ["--wake-burst", "1000", "--wake-refill", "1"]
    idle, busy, screen = [], [], []
    # The same paste settle for both agents (the claude preset's own is 0.5 s, for the
    # real Claude Code's Ink input): the doors are compared, not the settles.
    with open(os.path.join(d, "presets.json"), "w") as f:
        json.dump({"claude": {"ready": r"\? for shortcuts", "paste_settle": SETTLE}}, f)
    with Daemon(d, *opts) as daemon:
        conn = daemon.connect()
        hrec = os.path.join(files, "hooked.rec")
        srec = os.path.join(files, "standin.rec")
        call(
            conn,
            "session/spawn",
            argv=[claude, "--record", hrec],
            name="hk",
            cwd=files,
            agent="claude",
        )
        call(
            conn,
            "session/spawn",
            argv=[PY, STANDIN, "--record", srec],
            name="sc",
            cwd=files,
            ready="standin>",
        )
        poll(lambda: "idle" in _states(d, "hk"), 30, "the hooked agent's first report")

        def taken(rec: str, k: int) -> dict:
            poll(lambda: len(_records(rec)) > k, 30, f"line {k + 1} in {rec}")
            return _records(rec)[k]

        def settled(k: int) -> None:
            # The hooked agent back at its prompt: its turn's Stop reported idle.
            poll(lambda: _states(d, "hk").count("idle") >= k, 30, "the agent idle again")

        h = s = 0
        idles = 1
        for i in range(n + 1):
            # Idle, adapter: typed once the agent's report says idle.
            t0 = time.time()
            call(conn, "mail/send", to="hk", body="ping", subject="door")
            r = taken(hrec, h)
            h += 1
            idles += 1
            settled(idles)
            # Screen path: the plain stand-in behind the idle gate, also right after a
            # turn of its own (a line typed and answered), as the adapter's sample is.
            call(conn, "session/type", handle="sc", text="hi")
            taken(srec, s)
            s += 1
            t1 = time.time()
            call(conn, "mail/send", to="sc", body="ping", subject="door")
            rs = taken(srec, s)
            s += 1
            # Busy, adapter: mail sent mid-turn, handed over at the turn's end.
            call(conn, "session/type", handle="hk", text="work 0.4")
            taken(hrec, h)
            h += 1
            call(conn, "mail/send", to="hk", body="ping", subject="door")
            rb = taken(hrec, h)
            h += 1
            idles += 1
            settled(idles)
            if i == 0:
                continue  # warm-up
            idle.append((r["t"] - t0) * 1e9)
            screen.append((rs["t"] - t1) * 1e9)
            busy.append((rb["t"] - rb["stop_at"]) * 1e9)
            if r["door"] != "typed" or rb["door"] != "stop":
                raise RuntimeError(f"wrong doors: {r['door']}, {rb['door']}")
        conn.close()
        woken = events_in_log(d, "agent/woken")
    expected = 3 * (n + 1)  # the typed "hi" lines are not mail
    if len(woken) != expected:
        raise RuntimeError(f"{len(woken)} agent/woken events for {expected} mails")
    ip, sp, bp = p99(idle), p99(screen), p99(busy)
    common = {
        "samples": n,
        "idle_gate_s": GATE,
        "paste_settle_s": SETTLE,
        "agent": "tests/standin/hooked.py as claude (claude adapter); screen: standin.py",
        "success": f"{len(woken)}/{expected} woken",
    }
    return [
        Result(
            "door/idle",
            "ms",
            ms(ip),
            ms(sp),
            ip / sp,
            "<=",
            0.5,
            ratio_note="p99 send->taken, idle agent by its report / the screen path's",
            params=dict(
                common,
                idle_p50_ms=ms(median(idle)),
                idle_p99_ms=ms(ip),
                screen_p50_ms=ms(median(screen)),
                screen_p99_ms=ms(sp),
            ),
        ),
        Result(
            "door/busy",
            "ms",
            ms(bp),
            BUSY_TARGET_MS,
            ms(bp) / BUSY_TARGET_MS,
            "<=",
            1.0,
            ratio_note=f"p99 turn's end->taken / {BUSY_TARGET_MS:g} ms",
            params=dict(common, busy_p50_ms=ms(median(busy)), busy_p99_ms=ms(bp)),
        ),
    ]


def _session_tokens(conn: Client, files: str, k: int) -> list[str]:
    tokens = []
    for i in range(k):
        out = os.path.join(files, f"tok{i}")
        script = f'echo "$BENCH_TOKEN" > {out}.tmp && mv {out}.tmp {out}; exec sleep 600'
        call(
            conn, "session/spawn", argv=["sh", "-c", script], name=f"r{i}", cwd=files, sandbox=False
        )
        poll(lambda out=out: os.path.exists(out), 30, f"session r{i}'s token")
        with open(out) as f:
            tokens.append(f.read().strip())
    return tokens


def reports(ctx: Context) -> list[Result]:
    sessions = 16
    each = ctx.size(300, 1500)
    d = ctx.tmpdir("rp")
    files = ctx.tmpdir("rpf")
    with Daemon(d, "--agent-reports", "10000") as daemon:
        conn = daemon.connect()
        tokens = _session_tokens(conn, files, sessions)

        def client(i: int):
            c = Client(d, timeout=120.0)
            tok = tokens[i]
            yield
            try:
                for j in range(each):
                    event = "prompt" if j % 2 == 0 else "stop"
                    c.call({"verb": "agent/report", "token": tok, "event": event, "payload": "{}"})
            finally:
                c.close()

        c0 = cpu_seconds(daemon.pid)
        wall = run_threads(sessions, client)
        cpu = cpu_seconds(daemon.pid) - c0
        conn.close()
    total = sessions * each
    us = cpu / total * 1e6
    return [
        Result(
            "reports",
            "us",
            us,
            REPORT_TARGET_US,
            us / REPORT_TARGET_US,
            "<=",
            1.0,
            ratio_note=f"daemon CPU per report / {REPORT_TARGET_US:g} us",
            params={
                "sessions": sessions,
                "reports": total,
                "reports_per_s": round(total / (wall / 1e9)),
                "cpu_us_per_report": round(us, 1),
                "each_report": "a state change (prompt, stop alternating): one agent/state event",
            },
        )
    ]


def hook(ctx: Context) -> list[Result]:
    reps = ctx.size(10, 30)
    d = ctx.tmpdir("hk")
    files = ctx.tmpdir("hkf")
    bench = os.path.join(BIN, "bench")
    compiled = os.path.join(BIN, "bench-hook")  # ./run builds it when a C compiler is there
    has_compiled = os.access(compiled, os.X_OK)
    with Daemon(d, "--agent-reports", "10000") as daemon:
        conn = daemon.connect()
        (tok,) = _session_tokens(conn, files, 1)
        env = dict(clean_env(d), BENCH_TOKEN=tok)
        py_ns, c_ns, floor_ns = [], [], []

        def timed(argv: list[str]) -> int:
            t0 = now_ns()
            subprocess.run(argv, input=b"{}", env=env, check=True, stdout=subprocess.DEVNULL)
            return now_ns() - t0

        for i in range(reps + 2):  # alternating, so drift hits all alike
            p = timed([bench, "hook", "stop"])
            c = timed([compiled, "stop"]) if has_compiled else 0
            f = timed([PY, "-c", "pass"])
            if i >= 2:
                py_ns.append(p)
                c_ns.append(c)
                floor_ns.append(f)
        conn.close()
    # The row is the command adapter sessions run: the compiled client when built.
    used = c_ns if has_compiled else py_ns
    hm, fm = median(used), median(floor_ns)
    return [
        Result(
            "hook",
            "ms",
            ms(hm),
            ms(fm),
            hm / fm,
            "<=",
            1.3,
            ratio_note=(
                "median `bench-hook stop` (compiled) process / `python -c pass`"
                if has_compiled
                else "median `bench hook stop` process / `python -c pass` (no compiled client)"
            ),
            params={
                "runs": reps,
                "client": "bench-hook (C)" if has_compiled else "bench hook (Python)",
                "hook_p50_ms": ms(hm),
                "hook_p90_ms": ms(sorted(used)[int(len(used) * 0.9) - 1]),
                "python_hook_p50_ms": ms(median(py_ns)),
                "floor_p50_ms": ms(fm),
            },
        )
    ]
