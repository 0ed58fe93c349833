"""fleet: the operator's sends and an agent's wakes while a fleet of sessions streams.

32 sessions each print 256 KB/s of TUI-like output (cursor moves, colours, erased
lines: a full-screen program redrawing) into their ptys, which the daemon drains. The
operator meanwhile sends mail (one send every SEND_EVERY_S on a persistent connection,
timed from request to answer) and one quiet stand-in agent is woken again and again
(timed from the send's answer to its `agent/woken` event, the agent idle past the idle
gate at each send, so the only wait the daemon must impose is the paste settle).

The baseline is the same with the 32 sessions present but idle. Busy and idle phases
alternate in one run (the order flips each round), so a machine that gets slower or
faster during the run moves both alike. A flag file switches the streamers on and off;
each streamer records how many bytes it wrote, so the rate reached is reported (a pty
that is not drained blocks its writer, and the rate would fall short).
"""

import os
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
    cpu_seconds,
    median,
    ms,
    now_ns,
    p99,
)

SESSIONS = 32
RATE = 256 * 1024  # bytes/s each streamer writes while on
IDLE_GATE = 0.5
SETTLE = 0.2  # the paste settle: what a wake to an idle agent must wait
WAKE_SLACK_MS = 50.0
SEND_EVERY_S = 0.01
WARM_S = 0.5  # after switching the streamers, before measuring

STREAMER = r"""
import os, sys, time
flag, count = sys.argv[1], sys.argv[2]
rate, tick = int(sys.argv[3]), 0.02
# One redraw of a 40x120 TUI: per row, a cursor move, colours, text, erase to the end.
rows = []
for y in range(1, 41):
    fg, bg = 31 + y % 7, 40 + (y * 3) % 8
    rows.append(f"\x1b[{y};1H\x1b[{fg};{bg}m row {y:02d} \x1b[1m" + "#" * (y % 50)
                + f"\x1b[0m status {y * 7:05d} \x1b[K")
frame = ("\x1b[?25l" + "".join(rows) + "\x1b[40;1H\x1b[?25h").encode()
pattern = frame * (65536 // len(frame) + 2)
period = len(frame) * (65536 // len(frame) + 1)
sent, at, reported, start = 0, 0, 0.0, None
while True:
    now = time.monotonic()
    if not os.path.exists(flag):
        start = None
        time.sleep(0.05)
        continue
    if start is None:
        start, base = now, sent
    due = base + int(rate * (now - start)) - sent
    while due > 0:
        n = min(due, 16384)
        os.write(1, pattern[at : at + n])
        at = (at + n) % period
        sent += n
        due -= n
    if now - reported > 0.25:
        with open(count + ".tmp", "w") as f:
            f.write(str(sent))
        os.replace(count + ".tmp", count)
        reported = now
    time.sleep(tick)
"""


def _written(counts: list[str]) -> int:
    total = 0
    for path in counts:
        try:
            with open(path) as f:
                total += int(f.read() or 0)
        except (OSError, ValueError):
            pass
    return total


def _phase(conn, woken: EventStream, relay: TailStream, wakes: int, samples: dict) -> None:
    """`wakes` wake samples, with operator sends paced in between, into `samples`."""
    for _ in range(wakes):
        # The agent quiet past the idle gate (its answer to the last wake came last).
        while True:
            with relay.cond:
                last = relay.times[-1] if relay.times else 0
            if now_ns() >= last + int((IDLE_GATE + 0.2) * 1e9):
                break
            _timed_send(conn, samples)
            time.sleep(SEND_EVERY_S)
        with woken.cond:
            seen = len(woken.events)
        a = call(conn, "mail/send", to="agent", body="wake", subject="fleet")
        t_ack = now_ns()
        mail_id = a["mail_id"]
        while True:  # operator sends while the wake is on its way
            with woken.cond:
                t = next((t for t, e in woken.events[seen:] if e.get("mail_id") == mail_id), 0)
            if t:
                samples["wake"].append(t - t_ack)
                break
            if now_ns() - t_ack > 30e9:
                raise RuntimeError("a wake did not come within 30 s")
            _timed_send(conn, samples)
            time.sleep(SEND_EVERY_S)


def _timed_send(conn, samples: dict) -> None:
    t0 = now_ns()
    call(conn, "mail/send", to="ledger", body="entry", subject="fleet")
    samples["send"].append(now_ns() - t0)


def fleet(ctx: Context) -> list[Result]:
    rounds = ctx.size(2, 4)
    wakes = ctx.size(2, 5)
    d_dir = ctx.tmpdir("fl")
    work = ctx.tmpdir("fw")
    flag = os.path.join(work, "on")
    script = os.path.join(work, "streamer.py")
    with open(script, "w") as f:
        f.write(STREAMER)
    counts = [os.path.join(work, f"count{i}") for i in range(SESSIONS)]
    opts = ["--idle-gate", str(IDLE_GATE), "--paste-settle", str(SETTLE)]
    opts += ["--wake-burst", "1000", "--wake-refill", "1"]
    busy = {"send": [], "wake": []}
    idle = {"send": [], "wake": []}
    cpu = {"busy": 0.0, "idle": 0.0}
    span = {"busy": 0.0, "idle": 0.0}
    written = 0
    with Daemon(d_dir, *opts) as d:
        conn = d.connect()
        call(conn, "session/spawn", argv=[PY, STANDIN], name="agent", cwd=work, ready="standin>")
        for i in range(SESSIONS):
            argv = [PY, script, flag, counts[i], str(RATE)]
            call(conn, "session/spawn", argv=argv, name=f"tui{i:02d}", cwd=work)
        woken = EventStream(d_dir, "agent/woken")
        relay = TailStream(d_dir, "agent")
        try:
            # One wake to warm every path up (it waits for the agent's prompt).
            _phase(conn, woken, relay, 1, {"send": [], "wake": []})
            for r in range(rounds):
                order = ("busy", "idle") if r % 2 == 0 else ("idle", "busy")
                for mode in order:
                    if mode == "busy":
                        open(flag, "w").close()
                    elif os.path.exists(flag):
                        os.unlink(flag)
                    time.sleep(WARM_S)
                    c0, t0, w0 = cpu_seconds(d.pid), time.monotonic(), _written(counts)
                    _phase(conn, woken, relay, wakes, busy if mode == "busy" else idle)
                    cpu[mode] += cpu_seconds(d.pid) - c0
                    span[mode] += time.monotonic() - t0
                    if mode == "busy":
                        written += _written(counts) - w0
            if os.path.exists(flag):
                os.unlink(flag)
        finally:
            relay.close()
            woken.close()
            conn.close()
    send_busy, send_idle = p99(busy["send"]), p99(idle["send"])
    wake_busy, wake_idle = p99(busy["wake"]), p99(idle["wake"])
    gate_ms = SETTLE * 1000
    rate_each = written / span["busy"] / SESSIONS if span["busy"] else 0.0
    params = {
        "sessions": SESSIONS,
        "stream_kb_s_each": RATE // 1024,
        "reached_kb_s_each": round(rate_each / 1024, 1),
        "rounds": rounds,
        "wakes_per_phase": wakes,
        "send_every_ms": SEND_EVERY_S * 1000,
        "daemon_cpu_busy_pct": round(100 * cpu["busy"] / span["busy"], 1) if span["busy"] else None,
        "daemon_cpu_idle_pct": round(100 * cpu["idle"] / span["idle"], 1) if span["idle"] else None,
    }
    return [
        Result(
            "fleet/send",
            "ms",
            ms(send_busy),
            ms(send_idle),
            send_busy / send_idle,
            "<=",
            1.5,
            ratio_note="p99 streaming / p99 idle",
            params=dict(
                params,
                sends_busy=len(busy["send"]),
                sends_idle=len(idle["send"]),
                busy_p50_ms=round(ms(median(busy["send"])), 2),
                idle_p50_ms=round(ms(median(idle["send"])), 2),
            ),
        ),
        Result(
            "fleet/wake",
            "ms",
            ms(wake_busy),
            gate_ms + WAKE_SLACK_MS,
            ms(wake_busy) / (gate_ms + WAKE_SLACK_MS),
            "<=",
            1.0,
            ratio_note=f"p99 / (settle {gate_ms:g} ms + {WAKE_SLACK_MS:g} ms)",
            params=dict(
                params,
                wakes_busy=len(busy["wake"]),
                wakes_idle=len(idle["wake"]),
                idle_p99_ms=round(ms(wake_idle), 1),
                busy_ms=[round(ms(x)) for x in busy["wake"]],
                idle_ms=[round(ms(x)) for x in idle["wake"]],
                measured="mail/send answer -> agent/woken event received (agent idle past "
                f"the {IDLE_GATE:g} s idle gate at the send; paste settle {SETTLE:g} s)",
            ),
        ),
    ]
