"""dash-idle: what `bench dash` costs while it watches, and how fast an event shows.

CPU: a daemon with 20 live sessions (stand-in agents at their prompts) and one mail a
second (one `mail/sent` event a second, to a rotating recipient, so the sessions pane,
the events pane and a screen change); `bench dash` runs in a real terminal (tmux,
120x36) following the first session's screen. Over the same window (30 s; 8 s quick),
the dashboard's CPU time is compared with the daemon's.

Latency: the same app in-process through Textual's pilot, against the same kind of
daemon: for each of 20 mails, from the event's `ts` (stamped by the daemon when it logs
it) to the moment the dashboard took it and wrote its line into the panes (the app notes
the time per seq; the terminal is repainted on Textual's next refresh, within a frame).
"""

import asyncio
import os
import shutil
import subprocess
import time

from tests.support.spawn import STANDIN
from tools.perf.harness import (
    BENCH,
    PY,
    Context,
    Daemon,
    Result,
    call,
    cpu_seconds,
    median,
    p99,
    poll,
)

SESSIONS = 20
WARMUP = 3  # latency samples not counted (the first connections and draws)


def _spawn_all(conn, n: int) -> list[str]:
    names = [f"a{i:02d}" for i in range(n)]
    for h in names:
        call(conn, "session/spawn", argv=[PY, STANDIN], name=h, ready="standin>", cwd="/")
    return names


def _tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=True, timeout=20
    ).stdout


def _cpu_window(ctx: Context, d: Daemon, names: list[str]) -> tuple[float, float, int]:
    secs = ctx.size(8, 30)
    tname = f"bpdash{os.getpid()}"
    _tmux(
        "new-session",
        "-d",
        "-s",
        tname,
        "-x",
        "120",
        "-y",
        "36",
        "-e",
        f"BENCH_DIR={d.dir}",
        "-e",
        "TERM=xterm-256color",
        f"exec {BENCH} dash --dir {d.dir}",
    )
    try:
        pid = int(_tmux("list-panes", "-t", tname, "-F", "#{pane_pid}").split()[0])
        poll(
            lambda: "connected to" in _tmux("capture-pane", "-p", "-t", tname), 60, "the dashboard"
        )
        time.sleep(2)  # a benchmark: let the start-up work finish before the window
        conn = d.connect()
        c0, d0, t0 = cpu_seconds(pid), cpu_seconds(d.pid), time.monotonic()
        sent = 0
        while time.monotonic() - t0 < secs:
            call(
                conn, "mail/send", to=names[sent % len(names)], body=f"tick {sent}", subject="tick"
            )
            sent += 1
            time.sleep(max(0.0, t0 + sent - time.monotonic()))
        c1, d1 = cpu_seconds(pid), cpu_seconds(d.pid)
        conn.close()
        return c1 - c0, d1 - d0, sent
    finally:
        subprocess.run(["tmux", "kill-session", "-t", tname], capture_output=True)


def _latency(d: Daemon, names: list[str], samples: int) -> list[float]:
    from bench_cli.dash.app import Dash, Source

    async def go() -> list[float]:
        app = Dash(Source(d.dir))
        out = []
        async with app.run_test(size=(120, 36)) as pilot:
            deadline = time.monotonic() + 60
            while not (app.connected and len(app.board.rows) >= len(names)):
                assert time.monotonic() < deadline, "the dashboard did not load"
                await pilot.pause(0.05)
            loop = asyncio.get_running_loop()
            conn = d.connect()
            for i in range(samples + WARMUP):
                a = await loop.run_in_executor(
                    None,
                    lambda i=i: call(
                        conn, "mail/send", to=names[i % len(names)], body="x", subject="lat"
                    ),
                )
                deadline = time.monotonic() + 10
                ev = None
                while ev is None:
                    ev = next(
                        (e for e in reversed(app.board.events) if e.get("mail_id") == a["mail_id"]),
                        None,
                    )
                    if ev is None:
                        assert time.monotonic() < deadline, "the event never showed"
                        await asyncio.sleep(0.005)
                if i >= WARMUP:
                    out.append((app.shown_at[ev["seq"]] * 1000) - ev["ts"])
                await asyncio.sleep(0.3)
            conn.close()
        return out

    return asyncio.run(go())


def dash_idle(ctx: Context) -> list[Result]:
    if shutil.which("tmux") is None:
        raise RuntimeError("dash-idle needs tmux (apt-get install tmux)")
    d_dir = ctx.tmpdir("dash")
    with Daemon(d_dir, "--idle-gate", "0.5") as d:
        conn = d.connect()
        names = _spawn_all(conn, SESSIONS)
        conn.close()
        dash_cpu, daemon_cpu, sent = _cpu_window(ctx, d, names)
        lat = _latency(d, names, ctx.size(10, 20))
    secs = ctx.size(8, 30)
    return [
        Result(
            "dash-idle",
            "s CPU",
            dash_cpu,
            daemon_cpu,
            dash_cpu / daemon_cpu if daemon_cpu else None,
            "<=",
            1.0,
            params={
                "sessions": SESSIONS,
                "window_s": secs,
                "events": sent,
                "terminal": "tmux 120x36",
                "baseline": "the daemon's CPU, same window",
            },
        ),
        Result(
            "dash-idle/latency",
            "ms",
            p99(lat),
            200.0,
            p99(lat) / 200.0,
            "<=",
            1.0,
            ratio_note="p99 / 200 ms",
            params={
                "samples": len(lat),
                "warmup": WARMUP,
                "p50_ms": median(lat),
                "in_order_ms": [round(x) for x in lat],
                "measured": "event ts (daemon) -> line written (app, pilot)",
            },
        ),
    ]
