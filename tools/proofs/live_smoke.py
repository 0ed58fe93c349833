"""`just live-smoke`: a short end-to-end check of a daemon, printing each step.

Uses the daemon answering on $BENCH_DIR (or the default BENCH_DIR) if there is one,
else starts one in a temporary directory (and stops it again). Steps: hello, spawn a
stand-in agent, send it mail, see the wake in the event log and in the relay, read
the agent's answer, kill the agent, show the events of the run.
"""

import sys
import time

from tools.proofs.common import (
    Bench,
    ProofFailed,
    TempDaemon,
    standin_ring_args,
    timeline,
    wait_for,
)


def step(n: int, text: str) -> None:
    print(f"[{n}] {text}", flush=True)


def smoke(bench: Bench) -> None:
    hello = bench.run("status")
    step(
        1,
        f"hello: benchd {hello['version']} pid {hello['pid']} at {hello['bench_dir']}, "
        f"protocol {hello['protocol']}",
    )
    since = bench.events()[-1]["seq"] if bench.events() else 0
    name = f"smoke-{int(time.time() * 1000) % 100000}"
    s = bench.run(*standin_ring_args(name, "operator"))
    step(2, f"spawn: {s['handle']} session {s['session']} pid {s['pid']}")
    sent = bench.run("mail", "send", name, "-s", "smoke", "-m", "number 41")
    step(3, f"send: {sent['mail_id']} to {name} (live: {sent['live']})")
    woken = wait_for(
        lambda: [
            e
            for e in bench.events(since)
            if e["kind"] == "agent/woken" and e["mail_id"] == sent["mail_id"]
        ],
        30,
        f"the wake of {name}",
    )[0]
    step(4, f"wake seen: {woken['handle']} got a line with {woken['path']}")
    reply = wait_for(
        lambda: [
            m
            for m in bench.run("mail", "list", "--handle", "operator")["messages"]
            if m["from"] == name
        ],
        30,
        f"{name}'s answer to the operator",
    )[0]
    got = bench.run("mail", "read", reply["mail_id"], "--handle", "operator")
    if got["body"].strip() != "number 42":
        raise ProofFailed(f"{name} answered {got['body']!r}, expected 'number 42'")
    step(5, f"read: {got['body'].strip()!r} from {got['from']} ({got['path']})")
    bench.run("kill", name)
    exited = wait_for(
        lambda: [
            e
            for e in bench.events(since)
            if e["kind"] == "session/exited" and e["session"] == s["session"]
        ],
        30,
        f"{name} to exit",
    )[0]
    step(6, f"kill: {name} exited (signal {exited['signal']}, exit {exited['exit']})")
    step(7, "events:")
    print(timeline(bench.events(since)))


def main() -> int:
    probe = Bench(_default_dir())
    try:
        if probe.run("status", check=False).get("ok"):
            print(f"using the daemon on {probe.dir}")
            smoke(probe)
        else:
            with TempDaemon("--idle-gate", "0.5") as bench:
                print(f"no daemon on {probe.dir}: started one in {bench.dir}")
                smoke(bench)
    except ProofFailed as err:
        print(f"live-smoke: FAILED: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print("live-smoke: ok")
    return 0


def _default_dir() -> str:
    from bench_wire.client import resolve_dir

    return resolve_dir(None)


if __name__ == "__main__":
    sys.exit(main())
