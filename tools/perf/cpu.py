"""send-cpu: the daemon's own CPU time per acknowledged send, at 1 and at 16 senders.

A figure the disk and the machine's load cannot move much: it is the user + system time
the daemon's process (all its threads) was charged, from /proc/<pid>/stat, divided by
the sends it acknowledged. Wall-clock rows (send-1, send-16) depend on how fast the
disk flushes and on who else runs; this one says what a send costs the daemon itself.
The senders run in this process (threads with blocking clients): their CPU is not the
daemon's and is not counted.
"""

from tools.perf.harness import (
    Context,
    Daemon,
    Result,
    cpu_seconds,
    median,
    send_concurrently,
)

TARGET_US = 400.0  # at 16 senders


def per_send_us(daemon: Daemon, total: int, clients: int) -> float:
    c0 = cpu_seconds(daemon.pid)
    send_concurrently(daemon.dir, "box", total, clients)
    return (cpu_seconds(daemon.pid) - c0) / total * 1e6


def send_cpu(ctx: Context) -> list[Result]:
    reps = ctx.size(2, 3)
    n1 = ctx.size(300, 1000)
    n16 = ctx.size(1600, 4800)
    d = ctx.tmpdir("cpu")
    one, sixteen = [], []
    with Daemon(d) as daemon:
        send_concurrently(d, "box", 320, 16)  # warm-up: the mailbox, the index, the caches
        for _ in range(reps):  # alternate, so a slow spell of the machine falls on both
            one.append(per_send_us(daemon, n1, 1))
            sixteen.append(per_send_us(daemon, n16, 16))
    c16, c1 = median(sixteen), median(one)
    return [
        Result(
            "send-cpu",
            "us",
            c16,
            TARGET_US,
            c16 / TARGET_US,
            "<=",
            1.0,
            ratio_note=f"CPU per send at 16 senders / {TARGET_US:g} us",
            params={
                "cpu_us_16": round(c16),
                "cpu_us_1": round(c1),
                "rounds_us_16": [round(x) for x in sixteen],
                "rounds_us_1": [round(x) for x in one],
                "sends_16": n16,
                "sends_1": n1,
                "reps": reps,
                "stat": "median of rounds; user+system of the daemon's process (/proc/PID/stat)",
            },
        )
    ]
