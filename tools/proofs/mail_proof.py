"""`just mail-proof`: a number passed around a ring of agents as mail, 100 -> 103.

Three agents are spawned into daemon ptys with `bench spawn` (by default the stand-in
TUI agent of the tests, started exactly as a real agent would be; `--agents
claude,codex,pi` uses the real CLIs against a scripted model). The operator seeds
`number 100` to the first; each agent, woken by the reactor, reads the path in its wake
line, adds one and mails the next; the last mails the operator, and the proof collects
103 with `bench mail read`. Each hop is sent in reply to the mail that woke the agent
(`--in-reply-to`), so the ring is one thread. It prints the event trail, then each
message's delivery states as the operator sees them (`bench mail status`): every hop but
the last was woken and ends `replied`, naming the next hop; the last ends `read` by the
operator's read. It exits non-zero, with the reason, on any deviation or timeout. A fresh
BENCH_DIR is used and removed afterwards.
"""

import argparse
import os
import sys
import time

from tools.proofs.common import (
    ProofFailed,
    TempDaemon,
    mail_states,
    standin_ring_args,
    state_of,
    states_text,
    timeline,
    wait_for,
)

RING = ["alice", "bob", "carol"]
SEED = 100


def spawn_standins(bench, names: list[str]) -> dict:
    sessions = {}
    for i, name in enumerate(names):
        nxt = names[i + 1] if i + 1 < len(names) else "operator"
        sessions[name] = bench.run(*standin_ring_args(name, nxt))
    return sessions


def check_trail(events: list[dict], names: list[str]) -> None:
    """mail/sent -> agent/woken per hop, in ring order, then the operator's mail/read."""
    chain = ["operator", *names, "operator"]
    sent = [e for e in events if e["kind"] == "mail/sent"]
    hops = [(e["from"], e["to"]) for e in sent]
    want = list(zip(chain, chain[1:], strict=False))
    if hops != want:
        raise ProofFailed(f"the mail went {hops}, not {want}")
    woken = [e for e in events if e["kind"] == "agent/woken"]
    if [w["handle"] for w in woken] != names:
        raise ProofFailed(f"wakes went to {[w['handle'] for w in woken]}, not {names}")
    for hop, w in zip(sent, woken, strict=False):
        if w["mail_id"] != hop["mail_id"]:
            raise ProofFailed(f"{w['handle']} was woken for {w['mail_id']}, not {hop['mail_id']}")
        if w["seq"] < hop["seq"]:
            raise ProofFailed(f"{w['handle']} was woken before its mail was sent")
    reads = [e for e in events if e["kind"] == "mail/read" and e["handle"] == "operator"]
    if not reads or reads[-1]["mail_id"] != sent[-1]["mail_id"]:
        raise ProofFailed("the operator's mail/read of the last hop is missing")


def check_states(statuses: list[dict]) -> None:
    """Each hop but the last: woken (or read) and `replied`, naming the next hop; the
    last, to the operator: `read`, by the operator's read."""
    for a, nxt in zip(statuses, statuses[1:], strict=False):
        hop = f"{a['from']} -> {a['to']} ({a['mail_id']})"
        if state_of(a, "woken") is None and state_of(a, "read") is None:
            raise ProofFailed(f"{hop} was neither woken nor read: {a['states']}")
        replied = state_of(a, "replied")
        if a["state"] != "replied" or replied is None:
            raise ProofFailed(f"{hop} ends {a['state']}, not replied")
        if replied.get("reply") != nxt["mail_id"]:
            raise ProofFailed(f"{hop} was answered by {replied.get('reply')}, not {nxt['mail_id']}")
    last = statuses[-1]
    read = state_of(last, "read")
    if read is None or read.get("by") != "read" or read.get("reader") not in (None, "operator"):
        raise ProofFailed(
            f"the last hop ({last['mail_id']}) ends {last['state']}, not read by the operator"
        )


def spawn_from_file(bench, path: str) -> tuple[list[str], dict]:
    """`bench up -f FILE`: the daemon (already up) and the file's agents, in its order."""
    a = bench.run("up", "-f", path)
    started = [r for r in a["team"] if r["status"] == "started"]
    if len(started) != len(a["team"]):
        raise ProofFailed(f"bench up -f {path} did not start every agent: {a['team']}")
    return [r["name"] for r in started], {r["name"]: r for r in started}


def run(
    agents: str | None,
    timeout: float,
    keep: bool,
    daemon_opts: list[str],
    via: str = "shell",
    team_file: str | None = None,
) -> int:
    real = None
    names = RING
    if agents:
        from tools.proofs import real_ring

        real = real_ring.RealRing(agents.split(","), via)
        names = real.names
    try:
        with TempDaemon(*daemon_opts, keep=keep) as bench:
            print(f"BENCH_DIR {bench.dir}")
            try:
                if team_file is not None:
                    names, sessions = spawn_from_file(bench, team_file)
                elif real is None:
                    sessions = spawn_standins(bench, names)
                else:
                    sessions = real.spawn(bench)
                for name in names:
                    s = sessions[name]
                    print(f"spawned {name:<6} session {s['session']} pid {s['pid']}")
                if real is not None:
                    print(real.how_they_run(bench))
                if real is not None:
                    real.wait_mcp()
                seed = bench.run("mail", "send", names[0], "-s", "ring", "-m", f"number {SEED}")
                print(f"seeded  number {SEED} -> {names[0]} ({seed['mail_id']})")
                t0 = time.monotonic()
                listing = wait_for(
                    lambda: bench.run("mail", "list", "--handle", "operator")["messages"],
                    timeout,
                    f"the ring to come back to the operator (seeded {names[0]})",
                )
                got = bench.run("mail", "read", listing[0]["mail_id"], "--handle", "operator")
                elapsed = time.monotonic() - t0
                body = got["body"].strip()
                print(f"collected {body!r} from {got['from']} after {elapsed:.2f}s")
                want = f"number {SEED + len(names)}"
                if body != want:
                    raise ProofFailed(f"collected {body!r}, expected {want!r}")
                events = bench.events()
                check_trail(events, names)
                print("\nevent trail:")
                print(
                    timeline(
                        events,
                        {
                            "mail/sent",
                            "agent/woken",
                            "agent/state",
                            "wake/enter-retried",
                            "mail/read",
                        },
                    )
                )
                ring = [e for e in events if e["kind"] == "mail/sent"]
                statuses = mail_states(bench, [e["mail_id"] for e in ring])
                print("\ndelivery states (bench mail status, as the operator sees them):")
                print(states_text(statuses, ring[0]["ts"]))  # the trail's first event
                check_states(statuses)
                if real is not None:
                    real.check_mcp()
                    real.print_screens(bench)
                print(
                    f"\nmail-proof: ok: {SEED} -> {SEED + len(names)} through "
                    f"{' -> '.join(names)} and back to the operator"
                )
                return 0
            except ProofFailed:
                try:
                    print("\nevent trail so far:")
                    print(timeline(bench.events()))
                    if real is not None:
                        real.print_screens(bench)
                except ProofFailed:
                    pass
                raise
    finally:
        # After `bench down` (the with block's end): the agents have ended.
        if real is not None:
            real.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mail-proof", description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", help="real agent CLIs, e.g. claude,codex,pi (default: stand-ins)")
    p.add_argument("--timeout", type=float, default=None, help="seconds for the ring to close")
    p.add_argument("--keep", action="store_true", help="keep the temporary BENCH_DIR")
    p.add_argument("--idle-gate", default=None, help="the daemon's idle gate (seconds)")
    p.add_argument(
        "--via",
        choices=["shell", "mcp"],
        default="shell",
        help="mcp: agents with an MCP client (Claude Code, Codex) answer through "
        "`bench mcp` and have no shell tool; pi keeps its shell",
    )
    p.add_argument(
        "--file",
        metavar="TOML",
        help="start the ring from a team file (bench up -f), e.g. examples/ring.toml",
    )
    args = p.parse_args(argv)
    if args.file and args.agents:
        p.error("--file and --agents: the file names the agents")
    if args.via == "mcp" and not args.agents:
        p.error("--via mcp needs --agents (the stand-ins have no MCP client)")
    timeout = args.timeout or (240.0 if args.agents else 60.0)
    gate = args.idle_gate or ("1.0" if args.agents else "0.5")
    try:
        team_file = os.path.abspath(args.file) if args.file else None
        return run(args.agents, timeout, args.keep, ["--idle-gate", gate], args.via, team_file)
    except ProofFailed as err:
        print(f"\nmail-proof: FAILED: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nmail-proof: interrupted; cleaned up", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
