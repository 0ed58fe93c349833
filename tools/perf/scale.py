"""list-scale, send-scale, restart and rss: behaviour with a big mailbox on disk.

Filling 100,000 messages through the daemon is the expensive part, so it is done once per
run (`Seed`): one BENCH_DIR, mailbox `box`, filled with tools/perf/corpus.py's messages by
concurrent client processes through a daemon that is then stopped cleanly. list-scale,
restart, rss and search-scale (tools/perf/search.py) each start their own daemon on that
directory without sending to it; send-scale, which adds messages, runs after them (run.py
orders it so). Each benchmark still has its own daemon process.
"""

import json
import os
import subprocess
import time

from tools.perf.fill import fill
from tools.perf.harness import (
    PY,
    Context,
    Daemon,
    Result,
    call,
    median,
    ms,
    now_ns,
    p99,
    send_mail,
)

RSS_SETTLE_S = 0.5  # seconds for the daemon's memory to settle after the spawns

HANDLE = "box"
FILL_PROCS = 4  # client processes; see tools/perf/fill.py
FILL_THREADS = 8  # clients (threads, one connection each) per process
FILL_CLIENTS = FILL_PROCS * FILL_THREADS


class Seed:
    """The shared filled BENCH_DIR (made on first use)."""

    def __init__(self, ctx: Context):
        self.n = ctx.size(10_000, 100_000)
        self.dir = ctx.tmpdir("big")
        ctx.log(
            f"  filling {self.dir} with {self.n:,} messages ({FILL_PROCS} processes of "
            f"{FILL_THREADS} clients)..."
        )
        with Daemon(self.dir):
            self.fill_ns = fill(self.dir, HANDLE, self.n, FILL_PROCS, FILL_THREADS)
        self.inbox = os.path.join(self.dir, "mail", HANDLE, "inbox")
        on_disk = len(os.listdir(self.inbox))
        if on_disk != self.n:
            raise RuntimeError(f"the fill left {on_disk} files, not {self.n}")
        self.rate = self.n / (self.fill_ns / 1e9)
        ctx.log(f"  filled in {self.fill_ns / 1e9:.1f} s ({self.rate:,.0f} sends/s)")

    def note(self) -> dict:
        return {
            "shared_dir": f"one BENCH_DIR filled once with {self.n} messages, reused by "
            "list-scale, restart, rss, search-scale, send-scale (own daemon each)",
            "fill_s": round(self.fill_ns / 1e9, 1),
            "fill_rate": round(self.rate),
            "fill_clients": FILL_CLIENTS,
            "fill_processes": FILL_PROCS,
        }


def seed(ctx: Context) -> Seed:
    if "seed" not in ctx.shared:
        ctx.shared["seed"] = Seed(ctx)
    return ctx.shared["seed"]


def filled(ctx: Context, tag: str, n: int) -> str:
    """A fresh BENCH_DIR whose mailbox `box` holds n messages (daemon stopped)."""
    d = ctx.tmpdir(tag)
    with Daemon(d):
        if n:
            fill(d, HANDLE, n, 1, 16)
    return d


# ---------------------------------------------------------------- list-scale


def naive_list(inbox: str, limit: int = 50) -> tuple[list, int]:
    """What a tool without an index does: read every file, parse its front matter, sort."""
    rows = []
    for name in os.listdir(inbox):
        if not name.endswith(".md"):
            continue
        with open(os.path.join(inbox, name), "rb") as f:
            text = f.read().decode("utf-8")
        meta = {}
        lines = text.split("\n")
        for line in lines[1:]:
            if line == "---":
                break
            key, _, raw = line.partition(": ")
            meta[key] = json.loads(raw)  # the values are YAML double-quoted (JSON) scalars
        rows.append((meta["id"], meta["from"], meta.get("subject", ""), meta["date"]))
    rows.sort()
    return rows[:limit], len(rows)


def timed_lists(conns: list, n: int) -> list[list[int]]:
    """n `mail/list limit 50` per connection, alternating between them; latencies in ns."""
    lat: list[list[int]] = [[] for _ in conns]
    for _ in range(n):
        for i, conn in enumerate(conns):
            t0 = now_ns()
            a = call(conn, "mail/list", handle=HANDLE, limit=50)
            lat[i].append(now_ns() - t0)
            if len(a["messages"]) != 50:
                raise RuntimeError(f"a listing returned {len(a['messages'])} messages, not 50")
    return lat


def list_scale(ctx: Context) -> list[Result]:
    big = seed(ctx)
    n = ctx.size(300, 1000)
    scans = ctx.size(1, 3)
    small_dir = filled(ctx, "l1k", 1000)
    with Daemon(big.dir) as d_big, Daemon(small_dir) as d_small:
        c_big, c_small = d_big.connect(), d_small.connect()
        total = call(c_big, "mail/list", handle=HANDLE, limit=1)["total"]
        if total != big.n:
            raise RuntimeError(f"the big mailbox lists {total} messages, not {big.n}")
        timed_lists([c_big, c_small], 30)  # warm-up
        lat_big, lat_small = timed_lists([c_big, c_small], n)
        c_big.close()
        c_small.close()
    scan_ns = []
    for _ in range(scans):
        t0 = now_ns()
        rows, count = naive_list(big.inbox)
        scan_ns.append(now_ns() - t0)
        if count != big.n or len(rows) != 50:
            raise RuntimeError(f"the naive scan found {count} messages")
    pb, ps, scan = p99(lat_big), p99(lat_small), median(scan_ns)
    common = {
        "limit": 50,
        "calls": n,
        "warmup": 30,
        "stat": "p99 (nearest rank)",
        "big_p50_ms": ms(median(lat_big)),
        "small_p50_ms": ms(median(lat_small)),
        **big.note(),
    }
    return [
        Result(
            "list-scale",
            "ms",
            ms(pb),
            ms(ps),
            pb / ps,
            "<=",
            1.5,
            params=dict(
                common, big=big.n, small=1000, order="calls alternate between the two daemons"
            ),
        ),
        Result(
            "list-scale/scan",
            "ms",
            ms(pb),
            ms(scan),
            scan / pb,
            ">=",
            50,
            ratio_note="scan/list",
            params=dict(
                common,
                scans=scans,
                scan_stat="median",
                scan="listdir + read + front-matter parse of every file, sort, first 50",
            ),
        ),
    ]


# ---------------------------------------------------------------- send-scale


def send_scale(ctx: Context) -> list[Result]:
    big = seed(ctx)
    n = ctx.size(300, 1000)
    empty_dir = ctx.tmpdir("s0")
    with Daemon(big.dir) as d_big, Daemon(empty_dir) as d_empty:
        conns = [d_big.connect(), d_empty.connect()]
        for _ in range(30):  # warm-up, into another mailbox so `box` starts empty
            for c in conns:
                send_mail(c, "warm")
        lat: list[list[int]] = [[], []]
        per_round: list[float] = []  # p99 big / p99 empty of each round
        n_rounds = ctx.size(3, 6)
        for _ in range(n_rounds):
            here: list[list[int]] = [[], []]
            for _ in range(n // n_rounds):
                for i, c in enumerate(conns):
                    t0 = now_ns()
                    send_mail(c, HANDLE)
                    here[i].append(now_ns() - t0)
            per_round.append(p99(here[0]) / p99(here[1]))
            lat[0] += here[0]
            lat[1] += here[1]
        n = len(lat[0])
        totals = [call(c, "mail/list", handle=HANDLE, limit=1)["total"] for c in conns]
        for c in conns:
            c.close()
    if totals != [big.n + n, n]:
        raise RuntimeError(f"mailbox totals {totals} are not {[big.n + n, n]}")
    pb, pe = p99(lat[0]), p99(lat[1])
    return [
        Result(
            "send-scale",
            "ms",
            ms(pb),
            ms(pe),
            median(per_round),
            "<=",
            1.3,
            params={
                "rounds": n_rounds,
                "ratios": [round(x, 3) for x in per_round],
                "spread": [round(min(per_round), 3), round(max(per_round), 3)],
                "sends": n,
                "warmup": 30,
                "stat": "median of per-round p99 ratios (nearest rank), one client each",
                "big_p50_ms": ms(median(lat[0])),
                "empty_p50_ms": ms(median(lat[1])),
                "order": "sends alternate between the two daemons",
                "empty": f"a fresh BENCH_DIR; its mailbox grows 0 -> {n}",
                **big.note(),
            },
        )
    ]


# ---------------------------------------------------------------- restart


def read_heads(inbox: str) -> int:
    """ns to read the first 512 bytes of every file in the inbox (caches left as they are)."""
    t0 = now_ns()
    for name in os.listdir(inbox):
        with open(os.path.join(inbox, name), "rb") as f:
            f.read(512)
    return now_ns() - t0


def restart(ctx: Context) -> list[Result]:
    big = seed(ctx)
    reps = ctx.size(3, 7)
    ready, empty_ready = [], []
    empty_dir = ctx.tmpdir("r0")
    for i in range(reps + 1):  # the first is a warm-up
        d = Daemon(big.dir)
        t = d.start()
        if i == 0:
            conn = d.connect()
            total = call(conn, "mail/list", handle=HANDLE, limit=1)["total"]
            conn.close()
            if total != big.n:
                raise RuntimeError(f"after restart the mailbox lists {total}, not {big.n}")
        else:
            ready.append(t)
        d.stop()
        e = Daemon(empty_dir)
        t = e.start()
        e.stop()
        if i:
            empty_ready.append(t)
    heads = [read_heads(big.inbox) for _ in range(ctx.size(2, 3))]
    r, b = median(ready), median(heads)
    return [
        Result(
            "restart",
            "s",
            r / 1e9,
            b / 1e9,
            r / b,
            "<=",
            0.5,
            params={
                "restarts": reps,
                "warmup": 1,
                "stat": "median, process start -> ready line",
                "after": "a clean stop (SIGTERM)",
                "empty_dir_ready_s": median(empty_ready) / 1e9,
                "baseline": "listdir + open + read(512) of every message file, warm cache",
                "baseline_runs": len(heads),
                **big.note(),
            },
        )
    ]


# ---------------------------------------------------------------- rss

BARE = (
    "import trio, msgspec\n"
    "for line in open('/proc/self/status'):\n"
    "    if line.startswith(('VmRSS', 'VmHWM')): print(line.split()[1])\n"
)


def bare_rss_kb() -> tuple[int, int]:
    out = subprocess.run([PY, "-c", BARE], capture_output=True, text=True, check=True).stdout
    rss, hwm = (int(x) for x in out.split())
    return rss, hwm


def rss(ctx: Context) -> list[Result]:
    big = seed(ctx)
    sessions = ctx.size(20, 100)
    with Daemon(big.dir) as d:
        conn = d.connect()
        cursor = None
        for _ in range(20):  # page through part of the index, as a reader would
            a = call(conn, "mail/list", handle=HANDLE, limit=500, cursor=cursor)
            cursor = a["cursor"]
        idle = d.memory()
        for i in range(sessions):
            call(conn, "session/spawn", argv=["sleep", "600"], name=f"p{i}", cwd="/")
        live = [s for s in call(conn, "session/list")["sessions"] if s["state"] == "running"]
        if len(live) != sessions:
            raise RuntimeError(f"{len(live)} sessions live, not {sessions}")
        time.sleep(RSS_SETTLE_S)  # a benchmark, not a test: let the spawns' memory settle
        mem = d.memory()
        conn.close()
    bare = [bare_rss_kb() for _ in range(3)]
    b = median([x[0] for x in bare])
    return [
        Result(
            "rss",
            "MB",
            mem["VmRSS"] / 1024,
            b / 1024,
            mem["VmRSS"] / b,
            "<=",
            3.0,
            params={
                "sessions": sessions,
                "session_cmd": "sleep 600",
                "messages": big.n,
                "daemon_VmHWM_MB": mem["VmHWM"] / 1024,
                "daemon_no_sessions_VmRSS_MB": idle["VmRSS"] / 1024,
                "baseline": f"{PY} importing trio and msgspec (median of 3)",
                "baseline_VmHWM_MB": median([x[1] for x in bare]) / 1024,
                **big.note(),
            },
        )
    ]
