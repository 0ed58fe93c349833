"""wake, relay and fanout: the daemon's sessions under load.

- wake: a stand-in agent, its output followed through the relay (session/tail follow);
  mail/send ack -> the wake line submitted in the agent, minus the gate and the settle.
- relay: N sessions each printing M bytes, drained by benchd vs by tmux.
- fanout: job replies through the durable outbox.
"""

import os
import shutil
import subprocess
import threading
import time

from tests.support.spawn import STANDIN
from tools.perf.harness import (
    PY,
    Context,
    Daemon,
    EventStream,
    Result,
    TailStream,
    call,
    clean_env,
    events_in_log,
    median,
    ms,
    now_ns,
    p99,
    poll,
    rounds,
    secs,
    send_concurrently,
    timed_rate,
)

# ---------------------------------------------------------------- wake

GATE = 1.0
SETTLE = 0.2
PROMPT = "standin> "
ECHO = "You have mail from"
SUBMITTED = "ok: You have mail from"  # the stand-in prints this once Enter submitted the line


def wake(ctx: Context) -> list[Result]:
    """Each sample: the earliest instant the wake may land is max(ack, last output + gate)
    (the gate counts from the agent's last output, not from the send); what the reactor
    adds beyond that and the paste settle is its overhead. Samples alternate between an
    agent idle past the gate at the send (gate already satisfied) and an agent that has
    just printed (the full gate still to wait), so both paths are measured."""
    n = ctx.size(6, 20)
    warm = ctx.size(1, 2)
    d = ctx.tmpdir("wk")
    opts = [
        "--idle-gate",
        str(GATE),
        "--paste-settle",
        str(SETTLE),
        "--wake-burst",
        "1000",
        "--wake-refill",
        "1",
    ]
    over, raw, echo_lat, modes = [], [], [], []
    with Daemon(d, *opts) as daemon:
        conn = daemon.connect()
        call(conn, "session/spawn", argv=[PY, STANDIN], name="agent", cwd=d)
        relay = TailStream(d, "agent")
        try:
            relay.wait(lambda: relay.find(PROMPT, 0) >= 0, 30, "the stand-in's prompt")
            for i in range(warm + n):
                fresh = i % 2 == 1  # right after the agent's last output: the gate applies
                if not fresh:
                    # Pace to the instant the agent has been quiet past the gate.
                    quiet_at = relay.times[-1] / 1e9 + GATE + 0.2
                    time.sleep(max(0.0, quiet_at - now_ns() / 1e9))
                with relay.cond:
                    start = len(relay.text)
                call(conn, "mail/send", to="agent", body="ping", subject="wake")
                t_ack = now_ns()

                def seen(start=start):
                    j = relay.find(SUBMITTED, start)
                    return (j,) if j >= 0 and relay.find(PROMPT, j) >= 0 else None

                (j,) = relay.wait(seen, GATE + SETTLE + 15, "the submitted wake line")
                with relay.cond:
                    t_seen = relay.time_at(j + len(SUBMITTED) - 1)
                    e = relay.find(ECHO, start)
                    t_echo = relay.time_at(e + len(ECHO) - 1)
                    last = relay.last_before(e)
                earliest = max(t_ack, last + int(GATE * 1e9))
                if i >= warm:
                    over.append(t_seen - earliest - int(SETTLE * 1e9))
                    raw.append(t_seen - t_ack)
                    echo_lat.append(t_echo - earliest)
                    modes.append("gate" if last + int(GATE * 1e9) > t_ack else "idle")
        finally:
            relay.close()
        woken = len(events_in_log(d, "agent/woken"))
        retries = len(events_in_log(d, "wake/enter-retried"))
        conn.close()
    if woken != warm + n:
        raise RuntimeError(f"{woken} agent/woken events for {warm + n} mails")
    v = p99(over)
    return [
        Result(
            "wake",
            "ms",
            ms(v),
            GATE * 1000,
            v / (GATE * 1e9),
            "<=",
            0.05,
            params={
                "samples": n,
                "warmup": warm,
                "stat": "p99 (nearest rank) of overhead",
                "idle_gate_s": GATE,
                "paste_settle_s": SETTLE,
                "overhead": "t(submitted line seen in relay) - max(ack, last output + gate) "
                "- settle",
                "overhead_p50_ms": ms(median(over)),
                "overhead_ms": [round(ms(x), 1) for x in over],
                "modes": modes,
                "ack_to_submitted_p50_ms": ms(median(raw)),
                "paste_echo_after_earliest_p50_ms": ms(median(echo_lat)),
                "enter_retries": retries,
                "agent": "tests/standin/standin.py",
            },
        )
    ]


# ---------------------------------------------------------------- relay

LINE = "x" * 99  # + newline: 100-byte lines


def load_cmd(size: int) -> str:
    return f"yes {LINE} | head -c {size}"


def relay_bench(daemon: Daemon, n: int, size: int, tag: str) -> int:
    """ns from the first spawn until every session has exited, output drained."""
    follow = EventStream(daemon.dir, "session/exited")
    conn = daemon.connect()
    try:
        cmd = load_cmd(size)
        t0 = now_ns()
        ids = set()
        for i in range(n):
            a = call(conn, "session/spawn", argv=["sh", "-c", cmd], name=f"{tag}{i}", cwd="/")
            ids.add(a["session"])

        def done():
            ours = [(t, e) for t, e in follow.events if e["session"] in ids]
            return len(ours) == n and ours

        ours = follow.wait(done, 600, f"{n} sessions to exit")
        bad = [e for _, e in ours if e.get("exit") != 0]
        if bad:
            raise RuntimeError(f"sessions failed: {bad[:3]}")
        return max(t for t, _ in ours) - t0
    finally:
        follow.close()
        conn.close()


def relay_tmux(workdir: str, n: int, size: int) -> int:
    """ns from launching n tmux windows (one tmux command) until every command finished."""
    sock = os.path.join(workdir, "tmux.sock")
    marks = [os.path.join(workdir, f"done{i}") for i in range(n)]
    cmd = load_cmd(size)
    args = [
        TMUX,
        "-S",
        sock,
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "perf",
        "-x",
        "120",
        "-y",
        "40",
        f"{cmd}; touch {marks[0]}",
    ]
    for m in marks[1:]:
        args += [";", "new-window", "-d", f"{cmd}; touch {m}"]
    env = clean_env()
    env.setdefault("TERM", "xterm-256color")
    t0 = now_ns()
    try:
        subprocess.run(
            args, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
        deadline = time.monotonic() + 600
        pending = list(marks)
        poll(
            lambda: all(os.path.exists(m) for m in pending),
            max(0.0, deadline - time.monotonic()),
            "the tmux windows to finish",
            0.005,
        )
        return now_ns() - t0
    finally:
        subprocess.run([TMUX, "-S", sock, "kill-server"], env=env, capture_output=True)
        for m in marks:
            if os.path.exists(m):
                os.unlink(m)


TMUX = shutil.which("tmux") or "/usr/bin/tmux"


def relay(ctx: Context) -> list[Result]:
    n, size = ctx.size((10, 2_000_000), (50, 20_000_000))
    reps = 1  # at full size one rep of each already takes well over a minute (tmux ~65 s)
    d = ctx.tmpdir("rl")
    work = ctx.tmpdir("tm")
    if not os.path.exists(TMUX):
        raise RuntimeError("tmux is not installed")
    bench_t, tmux_t = [], []
    with Daemon(d) as daemon:
        relay_bench(daemon, 2, 200_000, "w")  # warm-up
        relay_tmux(work, 2, 200_000)
        for r in range(reps):
            bench_t.append(relay_bench(daemon, n, size, f"r{r}-"))
            tmux_t.append(relay_tmux(work, n, size))
    b, t = median(bench_t), median(tmux_t)
    return [
        Result(
            "relay",
            "s",
            secs(b),
            secs(t),
            b / t,
            "<=",
            1.0,
            params={
                "sessions": n,
                "bytes_each": size,
                "reps": reps,
                "load": f"sh -c '{load_cmd(size).replace(LINE, 'x' * 5 + '...')}' (100-byte lines)",
                "bench_end": "every session/exited (benchd logs it after draining to EOF)",
                "tmux_end": "every window's command finished (marker file), one tmux "
                "new-session + new-window command line, 120x40, private socket",
                "tmux": TMUX,
            },
        )
    ]


# ---------------------------------------------------------------- fanout

SPAWN_CLIENTS = 4


def fanout(ctx: Context) -> list[Result]:
    """Every job's command waits on a FIFO that the harness holds open; once all are
    running the harness closes it, so all jobs settle together and the figure is the
    outbox's, not the spawn rate's. Timed from that release to the N-th outbox/posted."""
    n_rounds = ctx.size(2, 4)
    n = ctx.size(100, 250)  # jobs per round
    seconds = ctx.size(0.5, 2.0)
    sd = ctx.tmpdir("fo16")
    runs: list[dict] = []

    def sends(k: int) -> int:
        return send_concurrently(sd, "box", k, 16)

    def one() -> float:
        run = _fanout_once(ctx, n)
        runs.append(run)
        return run["rate"]

    with Daemon(sd):
        send_concurrently(sd, "box", 160, 16)  # warm-up
        r = rounds(n_rounds, one, lambda: timed_rate(sends, seconds, 320))
    return [
        Result(
            "fanout",
            "per s",
            median(r["bench"]),
            median(r["base"]),
            r["ratio"],
            ">=",
            0.8,
            params={
                "rounds": n_rounds,
                "ratios": r["ratios"],
                "spread": r["spread"],
                "jobs": n,
                "reply_to_each": 1,
                "job_cmd": "cat FIFO (released together)",
                "stat": "median of per-round ratios; first job/settled -> N-th outbox/posted "
                "(as followers see them), against 16 senders on another daemon in the same round",
                "rate_release_to_posted": [round(x["wall_rate"], 1) for x in runs],
                "settle_span_s": [x["settle_span_s"] for x in runs],
                "spawn_s": [round(x["spawn_s"], 2) for x in runs],
                "spawn_clients": SPAWN_CLIENTS,
                "baseline": "send-16 (16 senders, one persistent connection each), alternating",
            },
        )
    ]


def _fanout_once(ctx: Context, n: int) -> dict:
    d = ctx.tmpdir("fo")
    gate_dir = ctx.tmpdir("ff")
    fifo = os.path.join(gate_dir, "go")
    os.mkfifo(fifo)
    hold = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer, so readers' opens don't block
    released = False
    try:
        with Daemon(d) as daemon:
            pids: list[int] = []
            lock = threading.Lock()
            errors: list[BaseException] = []

            def spawner(k: int) -> None:
                try:
                    conn = daemon.connect()
                    for i in range(k, n, SPAWN_CLIENTS):
                        a = call(
                            conn,
                            "session/spawn",
                            argv=["cat", fifo],
                            name=f"j{i}",
                            cwd="/",
                            job={"body": f"task {i}", "subject": "job", "reply_to": ["parent"]},
                        )
                        with lock:
                            pids.append(a["pid"])
                    conn.close()
                except BaseException as err:  # noqa: BLE001 - raised below
                    errors.append(err)

            t_spawn = now_ns()
            threads = [threading.Thread(target=spawner, args=(k,)) for k in range(SPAWN_CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            spawn_s = secs(now_ns() - t_spawn)
            wait_open(pids, fifo, 120)
            posted = EventStream(d, "outbox/posted")
            settling = EventStream(d, "job/settled")
            try:
                t0 = now_ns()
                os.close(hold)
                released = True
                got = posted.wait(
                    lambda: len(posted.events) >= n and posted.events,
                    600,
                    f"{n} outbox/posted events",
                )
                t_end = got[n - 1][0]
                t_first = settling.wait(lambda: settling.events, 60, "a job/settled event")[0][0]
            finally:
                posted.close()
                settling.close()
            conn = daemon.connect()
            total = call(conn, "mail/list", handle="parent", limit=1)["total"]
            conn.close()
            if total != n:
                raise RuntimeError(f"the parent's mailbox holds {total} replies, not {n}")
        settled = events_in_log(d, "job/settled")
        outcomes = {e["outcome"] for e in settled}
        if len(settled) != n or outcomes != {"completed"}:
            raise RuntimeError(f"{len(settled)} jobs settled, outcomes {outcomes}")
        posted_ts = sorted(e["ts"] for e in events_in_log(d, "outbox/posted"))
        settled_ts = sorted(e["ts"] for e in settled)
    finally:
        if not released:
            os.close(hold)
    wall_rate = n / secs(t_end - t0)
    # "Replies/s through the outbox": from the first settlement (replies written into the
    # outbox) to the N-th reply posted, as event followers see them arrive (the log's own
    # time stamps are one per batch: with big batches their span can be a millisecond or
    # none). The wall clock from the release also counts the processes exiting and being
    # reaped (kept as a param).
    rate = n / secs(max(t_end - t_first, 1_000_000))
    return {
        "rate": rate,
        "wall_rate": wall_rate,
        "settle_span_s": (settled_ts[-1] - settled_ts[0]) / 1000,
        "log_span_ms": posted_ts[-1] - settled_ts[0],
        "spawn_s": spawn_s,
    }


def wait_open(pids: list[int], path: str, timeout: float) -> None:
    """Until as many processes as there are jobs have `path` open (then closing our end
    releases them all). A job's program runs sandboxed by default, below bwrap in a pid
    namespace of its own, so the pid spawn answers is not the process that opens the
    FIFO: every process is looked at, and the ones holding it are counted."""
    holding: set[int] = set()
    me = os.getpid()  # holds it too: the writer end that keeps the readers' opens from blocking

    def all_open() -> bool:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in holding or int(entry) == me:
                continue
            fd_dir = f"/proc/{entry}/fd"
            try:
                if any(os.readlink(os.path.join(fd_dir, fd)) == path for fd in os.listdir(fd_dir)):
                    holding.add(int(entry))
            except OSError:
                pass  # gone, or not ours to look at
        return len(holding) >= len(pids)

    poll(all_open, timeout, f"the jobs to open {path}", 0.05)
