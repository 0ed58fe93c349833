"""spawn: what the sandbox costs a session's start.

Each sample: a `session/spawn` request sent, until the session's first output arrives
through `session/tail -f` (the program is `sh -c 'echo ...'`). Sandboxed spawns (bwrap,
the daemon's default where the kernel allows it) alternate with unsandboxed ones
(`--no-sandbox`) on the same daemon, so drift hits both alike; the figure is the
sandboxed median over the unsandboxed median.
"""

from tools.perf.harness import (
    Context,
    Daemon,
    Result,
    TailStream,
    call,
    median,
    ms,
    now_ns,
    percentile,
)

MARK = "first-output"


def _one(conn, d: str, name: str, sandbox: bool) -> int:
    t0 = now_ns()
    call(
        conn,
        "session/spawn",
        argv=["sh", "-c", f"echo {MARK}; exec sleep 60"],
        name=name,
        cwd=d,
        sandbox=sandbox,
    )
    tail = TailStream(d, name)
    try:
        at = tail.wait(lambda: tail.find(MARK, 0) + 1, 30, f"{name}'s first output") - 1
        took = tail.time_at(at) - t0
    finally:
        tail.close()
    call(conn, "session/kill", handle=name)
    return took


def spawn(ctx: Context) -> list[Result]:
    n = ctx.size(10, 40)
    warm = 2
    d = ctx.tmpdir("sp")
    boxed, plain = [], []
    with Daemon(d) as daemon:
        conn = daemon.connect()
        caps = call(conn, "hello")["caps"]
        if caps.get("isolation") != "on":
            raise RuntimeError(f"the sandbox cannot run here: {caps.get('isolation_note')}")
        for i in range(warm + n):
            b = _one(conn, d, f"b{i}", True)
            p = _one(conn, d, f"p{i}", False)
            if i >= warm:
                boxed.append(b)
                plain.append(p)
        conn.close()
    mb, mp = median(boxed), median(plain)
    return [
        Result(
            "spawn",
            "ms",
            ms(mb),
            ms(mp),
            mb / mp,
            "<=",
            1.5,
            params={
                "samples": n,
                "warmup": warm,
                "stat": "median, session/spawn sent -> first output through tail -f",
                "sandboxed_p90_ms": ms(percentile(boxed, 90)),
                "unsandboxed_p90_ms": ms(percentile(plain, 90)),
            },
        )
    ]
