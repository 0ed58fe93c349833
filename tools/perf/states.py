"""wake-states: how long mail takes to reach `woken` and `active`, and how often it gets
there, read from the delivery states the sender sees (mail/status).

N messages go round-robin to K live stand-in agents. Each is sent once its agent has
been quiet for the idle gate (the gate counts from the agent's last output: the daemon's
idle time for it, from `session/list`), so the
figure is what bench adds once a wake may land: the paste, its settle, the Enter and
the commits. send -> woken and send -> active are measured from just before the send
to the times the daemon recorded (wall ms); the success rate counts the messages that
reached `woken` or say why not (`not-woken` with a reason): every message to a live
session must do one or the other.
"""

import calendar
import time

from tests.support.spawn import STANDIN
from tools.perf.harness import PY, Context, Daemon, Result, call, median, p99

GATE = 1.0
SETTLE = 0.05
PROMPT = "standin>"  # a screen line is right-trimmed
MARGIN_MS = 50.0  # target: p99 send -> woken <= gate + this


def _status(conn, mail_id: str) -> dict:
    return call(conn, "mail/status", mail_id=mail_id)


def _at(a: dict, state: str) -> int | None:
    """A state's time in wall ms, from its ISO text (2026-12-02T05:44:11.448Z)."""
    for s in a["states"]:
        if s["state"] == state:
            whole, _, frac = s["at"].rstrip("Z").partition(".")
            t = time.strptime(whole, "%Y-%m-%dT%H:%M:%S")
            return calendar.timegm(t) * 1000 + int(frac or 0)
    return None


def _shows(daemon: Daemon, name: str, text: str) -> bool:
    with daemon.connect() as c:  # a connection of its own: the screen answer ends with it
        return any(text in line for line in call(c, "session/screen", handle=name)["lines"])


def _quiet(conn, name: str, secs: float) -> None:
    """Until the agent has printed nothing for `secs` (the daemon's idle time for it)."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        s = next(x for x in call(conn, "session/list")["sessions"] if x["handle"] == name)
        idle = (s.get("idle_ms") or 0) / 1000
        if idle >= secs:
            return
        time.sleep(max(0.01, secs - idle))


def _settled(a: dict) -> bool:
    names = {s["state"] for s in a["states"]}
    return "active" in names or "not-woken" in names


def wake_states(ctx: Context) -> list[Result]:
    n = ctx.size(8, 60)
    k = ctx.size(2, 4)
    d = ctx.tmpdir("ws")
    opts = ["--idle-gate", str(GATE), "--paste-settle", str(SETTLE)]
    opts += ["--wake-burst", "1000", "--wake-refill", "1", "--enter-check", "2.0"]
    to_woken, to_active, results = [], [], []
    with Daemon(d, *opts) as daemon:
        conn = daemon.connect()
        agents = [f"agent{i}" for i in range(k)]
        for name in agents:
            call(conn, "session/spawn", argv=[PY, STANDIN], name=name, cwd=d)
        deadline = time.monotonic() + 60
        for name in agents:
            while not _shows(daemon, name, PROMPT):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} showed no prompt")
                time.sleep(0.05)
        last: dict[str, str] = {}
        for i in range(n):
            name = agents[i % k]
            prev = last.get(name)
            if prev is not None:  # its previous wake has played out (active, or why not)
                end = time.monotonic() + 30
                while not _settled(a := _status(conn, prev)) and time.monotonic() < end:
                    time.sleep(0.02)
            _quiet(conn, name, GATE + 0.05)  # past the gate since its last output
            t_send = time.time_ns() // 1_000_000
            mail_id = call(conn, "mail/send", to=name, body=f"ping {i}", subject="wake")["mail_id"]
            last[name] = mail_id
            results.append((t_send, mail_id))
        end = time.monotonic() + 60
        for _t, mail_id in results:
            while not _settled(_status(conn, mail_id)) and time.monotonic() < end:
                time.sleep(0.02)
        reached = 0
        reasons: dict[str, int] = {}
        for t_send, mail_id in results:
            a = _status(conn, mail_id)
            woken, active = _at(a, "woken"), _at(a, "active")
            if woken is not None:
                reached += 1
                to_woken.append(woken - t_send)
                if active is not None:
                    to_active.append(active - t_send)
            else:
                why = next(
                    (s.get("reason") for s in a["states"] if s["state"] == "not-woken"), None
                )
                if why:
                    reached += 1
                    reasons[why] = reasons.get(why, 0) + 1
        conn.close()
    if not to_woken:
        raise RuntimeError("no message reached woken")
    p99_woken = p99(to_woken)
    target = GATE * 1000 + MARGIN_MS
    success = reached / n
    common = {"messages": n, "agents": k, "idle_gate_s": GATE, "paste_settle_s": SETTLE}
    return [
        Result(
            "wake-states/woken",
            "ms",
            p99_woken,
            target,
            p99_woken / target,
            "<=",
            1.0,
            params={
                **common,
                "stat": "p99 (nearest rank) of send -> woken, from mail/status",
                "woken_p50_ms": median(to_woken),
                "active_p50_ms": median(to_active) if to_active else None,
                "active_p99_ms": p99(to_active) if to_active else None,
                "active": len(to_active),
                "woken_ms": to_woken,
                "target": f"p99 <= gate + {MARGIN_MS:g} ms",
            },
            ratio_note="p99 / (gate + 50 ms)",
        ),
        Result(
            "wake-states/success",
            "%",
            success * 100,
            100.0,
            success,
            ">=",
            1.0,
            params={
                **common,
                "woken": len(to_woken),
                "not_woken": reasons,
                "rule": "each message reached woken, or not-woken with a reason",
            },
        ),
    ]
