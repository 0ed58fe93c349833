"""cli-send, send-1, send-16, send-noisy: one CLI send, durable throughput, latency under noise.

Baseline for the throughput pair: a hand-rolled durable Maildir loop with the stdlib
(`mailbox.Maildir.add`, then fsync of the file and of its directory), in a temporary
directory under /tmp like the BENCH_DIRs (same filesystem). Baseline and daemon runs
alternate, so drift on a noisy machine hits both alike.
"""

import mailbox
import os
import resource
import subprocess

from tools.perf.harness import (
    BENCH,
    BODY,
    PY,
    Context,
    Daemon,
    Result,
    call,
    clean_env,
    median,
    ms,
    now_ns,
    p99,
    percentile,
    rounds,
    send_concurrently,
    send_mail,
    timed_rate,
)

# ---------------------------------------------------------------- cli-send


def cli_send(ctx: Context) -> list[Result]:
    runs = ctx.size(20, 60)
    warm = 5
    d = ctx.tmpdir("cli")
    with Daemon(d):
        env = clean_env(d)
        bench_cmd = [BENCH, "mail", "send", "x", "-m", "y"]
        floor_cmd = [PY, "-c", "pass"]
        # The fast path's own import time, measured inside a fresh interpreter.
        import_cmd = [
            PY,
            "-c",
            "import time; t = time.perf_counter_ns(); import bench_cli.entry; "
            "print(time.perf_counter_ns() - t)",
        ]

        cpu: dict[str, list[float]] = {"bench": [], "floor": []}

        def wall(cmd, tally: str | None = None) -> int:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = now_ns()
            proc = subprocess.run(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            t = now_ns() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if tally:  # the process's own CPU time: what load on the machine cannot add to
                cpu[tally].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            if proc.returncode != 0:
                raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr[-500:]!r}")
            return t

        for _ in range(warm):
            wall(floor_cmd)
            wall(bench_cmd)
        wall(bench_cmd)  # the mailbox exists from here on: no first-send hint
        bench_t, floor_t, import_t = [], [], []
        for _ in range(runs):  # alternate, so drift hits both alike
            floor_t.append(wall(floor_cmd, "floor"))
            bench_t.append(wall(bench_cmd, "bench"))
            out = subprocess.run(import_cmd, env=env, capture_output=True, text=True, check=True)
            import_t.append(int(out.stdout))
        # What the send path imports (PYTHONPROFILEIMPORTTIME = python -X importtime).
        prof = subprocess.run(
            bench_cmd,
            env=dict(env, PYTHONPROFILEIMPORTTIME="1"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        imported = [
            ln.rsplit("|", 1)[-1].strip()
            for ln in prof.stderr.splitlines()
            if ln.startswith("import time:") and "|" in ln
        ]
    b, f = median(bench_t), median(floor_t)
    return [
        Result(
            "cli-send",
            "ms",
            ms(b),
            ms(f),
            b / f,
            "<=",
            1.3,
            params={
                "fastpath_import_ms": round(ms(median(import_t)), 2),
                "cpu_ratio": round(median(cpu["bench"]) / median(cpu["floor"]), 3),
                "bench_cpu_ms": round(median(cpu["bench"]) * 1000, 2),
                "floor_cpu_ms": round(median(cpu["floor"]) * 1000, 2),
                "runs": runs,
                "warmup": warm,
                "stat": "median wall time per process",
                "command": " ".join(["bench", *bench_cmd[1:]]),
                "floor": f"{PY} -c pass",
                "bench_p90_ms": ms(percentile(bench_t, 90)),
                "floor_p90_ms": ms(percentile(floor_t, 90)),
                "modules_imported": len(imported),
                "imports_trio": "trio" in imported,
                "imports_msgspec": "msgspec" in imported,
                "imports_click": "click" in imported,
            },
        )
    ]


# ---------------------------------------------------------------- the Maildir baseline


class MaildirBaseline:
    """The floor a careful hand-rolled durable mailbox reaches: add, fsync file, fsync dir."""

    def __init__(self, ctx: Context):
        root = ctx.tmpdir("md")
        self.md = mailbox.Maildir(os.path.join(root, "maildir"), create=True)
        self.new = os.path.join(self.md._path, "new")
        self.message = '---\nfrom: "operator"\nto: "box"\nsubject: "perf"\n---\n\n' + BODY

    def send(self) -> None:
        key = self.md.add(self.message)
        fd = os.open(os.path.join(self.new, key), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(self.new, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rate(self, n: int) -> float:
        t0 = now_ns()
        for _ in range(n):
            self.send()
        return n / ((now_ns() - t0) / 1e9)


# ---------------------------------------------------------------- send-1


def send_1(ctx: Context) -> list[Result]:
    n_rounds = ctx.size(3, 6)
    seconds = ctx.size(0.5, 2.0)
    base = MaildirBaseline(ctx)
    d = ctx.tmpdir("s1")
    lat: list[int] = []
    with Daemon(d) as daemon:
        conn = daemon.connect()
        for _ in range(50):
            send_mail(conn, "box")
        base.rate(50)

        def sends(k: int) -> None:
            for _ in range(k):
                t0 = now_ns()
                send_mail(conn, "box")
                lat.append(now_ns() - t0)

        def maildir(k: int) -> None:
            for _ in range(k):
                base.send()

        r = rounds(
            n_rounds,
            lambda: timed_rate(sends, seconds, 20),
            lambda: timed_rate(maildir, seconds, 20),
        )
        conn.close()
    return [
        Result(
            "send-1",
            "sends/s",
            median(r["bench"]),
            median(r["base"]),
            r["ratio"],
            ">=",
            1.0,
            params={
                "rounds": n_rounds,
                "round_s": seconds,
                "ratios": r["ratios"],
                "spread": r["spread"],
                "warmup": 50,
                "stat": "median of per-round ratios (baseline and daemon alternate)",
                "clients": 1,
                "latency_p50_ms": ms(median(lat)),
                "latency_p99_ms": ms(p99(lat)),
                "baseline": "mailbox.Maildir.add + fsync(file) + fsync(dir), same filesystem",
            },
        )
    ]


# ---------------------------------------------------------------- send-16


def send16_rounds(ctx: Context, clients: int = 16) -> dict:
    """Rounds of `clients` concurrent senders against the single-threaded Maildir loop,
    alternating (see harness.rounds); the mailbox's total is checked at the end."""
    n_rounds = ctx.size(3, 6)
    seconds = ctx.size(0.5, 2.0)
    base = MaildirBaseline(ctx)
    d = ctx.tmpdir("s16")
    sent = 0

    def sends(k: int) -> int:
        nonlocal sent
        sent += k
        return send_concurrently(d, "box", k, clients)

    def maildir(k: int) -> None:
        for _ in range(k):
            base.send()

    with Daemon(d) as daemon:
        send_concurrently(d, "box", clients * 10, clients)  # warm-up
        base.rate(50)
        r = rounds(
            n_rounds,
            lambda: timed_rate(sends, seconds, clients * 20),
            lambda: timed_rate(maildir, seconds, 20),
        )
        conn = daemon.connect()
        got = call(conn, "mail/list", handle="box", limit=1)["total"]
        conn.close()
        if got != clients * 10 + sent:
            raise RuntimeError(f"the mailbox holds {got} messages, not {clients * 10 + sent}")
    r.update(rounds_n=n_rounds, round_s=seconds, sent=sent)
    return r


def send_16(ctx: Context) -> list[Result]:
    r = send16_rounds(ctx)
    rate = median(r["bench"])
    ctx.shared["send-16"] = rate
    return [
        Result(
            "send-16",
            "sends/s",
            rate,
            median(r["base"]),
            r["ratio"],
            ">=",
            3.0,
            params={
                "clients": 16,
                "client_kind": "threads, one persistent connection each",
                "rounds": r["rounds_n"],
                "round_s": r["round_s"],
                "ratios": r["ratios"],
                "spread": r["spread"],
                "sends": r["sent"],
                "stat": "median of per-round ratios (baseline and daemon alternate)",
                "rates": [round(x) for x in r["bench"]],
                "baseline_rates": [round(x) for x in r["base"]],
                "baseline": "single-threaded mailbox.Maildir.add + fsync(file) + fsync(dir)",
            },
        )
    ]


# ---------------------------------------------------------------- send-noisy

# A bulk writer on the same filesystem, as a build or a download would be: big files
# written without any flush, so the page cache fills with dirty data nobody asked to sync.
WRITER = """
import os, sys
path, chunk = sys.argv[1], b"w" * (1 << 20)
while True:
    with open(path, "wb") as f:
        for _ in range(64):
            f.write(chunk)
    os.unlink(path)
"""


def send_noisy(ctx: Context) -> list[Result]:
    """Sequential sends under a bulk writer: p99 and max against the Maildir loop under
    the same writer (both alternate in rounds, so they share the noise)."""
    n = ctx.size(200, 1000)
    rounds = ctx.size(4, 10)
    base = MaildirBaseline(ctx)
    d = ctx.tmpdir("sn")
    noise = ctx.tmpdir("noise")
    lat, base_lat = [], []
    with Daemon(d) as daemon:
        conn = daemon.connect()
        for _ in range(50):
            send_mail(conn, "box")
        base.rate(50)
        writer = subprocess.Popen([PY, "-c", WRITER, os.path.join(noise, "bulk")])
        try:
            for _ in range(rounds):
                for _ in range(n // rounds):
                    t0 = now_ns()
                    base.send()
                    base_lat.append(now_ns() - t0)
                for _ in range(n // rounds):
                    t0 = now_ns()
                    send_mail(conn, "box")
                    lat.append(now_ns() - t0)
        finally:
            writer.kill()
            writer.wait()
        conn.close()
    params = {
        "sends": len(lat),
        "rounds": rounds,
        "stat": "p99 (nearest rank) and max",
        "clients": 1,
        "order": "daemon and baseline alternate in rounds",
        "noise": "one process writing 64 MiB files in a loop, no fsync, same filesystem",
        "p50_ms": ms(median(lat)),
        "baseline_p50_ms": ms(median(base_lat)),
        "baseline": "mailbox.Maildir.add + fsync(file) + fsync(dir) under the same writer",
    }
    return [
        Result(
            "send-noisy",
            "ms",
            ms(p99(lat)),
            ms(p99(base_lat)),
            p99(lat) / p99(base_lat),
            "<=",
            2.0,
            params=params,
        ),
        Result(
            "send-noisy/max",
            "ms",
            ms(max(lat)),
            ms(max(base_lat)),
            max(lat) / max(base_lat),
            "<=",
            5.0,
            params={"stat": "max of the same sends"},
        ),
    ]
