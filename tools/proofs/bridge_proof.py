"""`just bridge-proof`: the ring 100 -> 103 across two nodes over NATS JetStream.

A real `nats-server -js` on a free loopback port (temporary store), two daemons (node1,
node2), each with its `bench bridge`. alice and bob live on node1, carol on node2, all
stand-in agents started with `bench spawn`. The operator on node1 seeds `number 100` to
alice; alice mails bob, bob mails `carol@node2`, carol mails `operator@node1`; the proof
reads 103 back on node1. It prints both nodes' event trails and exits non-zero with the
reason on any deviation or timeout. Everything temporary is removed afterwards.
"""

import argparse
import sys
import time

from tools.proofs.common import ProofFailed, standin_ring_args, timeline, wait_for

SEED = 100
# handle, node, where its wake sends the next number
RING = [
    ("alice", "node1", "bob"),
    ("bob", "node1", "carol@node2"),
    ("carol", "node2", "operator@node1"),
]
SHOWN = {
    "mail/sent",
    "agent/woken",
    "bridge/queued",
    "bridge/forwarded",
    "bridge/delivered",
    "mail/read",
}


def run(timeout: float) -> int:
    from tests.nodes import NatsServer, Node, have_bridge, wait_known

    why = have_bridge()
    if why:
        raise ProofFailed(why)
    nats = NatsServer()
    nats.start()
    nodes = {
        "node1": Node("node1", nats, "--idle-gate", "0.5"),
        "node2": Node("node2", nats, "--idle-gate", "0.5"),
    }
    try:
        for n in nodes.values():
            n.start()
            n.start_bridge()
        wait_known(nodes["node1"], nodes["node2"])
        print(f"nats-server {nats.url} (store {nats.store})")
        for name, n in nodes.items():
            print(f"{name}: BENCH_DIR {n.dir}, bridge pid {n.bridge.pid}")
        for handle, node, nxt in RING:
            s = nodes[node].d.ok(*standin_ring_args(handle, nxt))
            print(f"spawned {handle:<6} on {node} (session {s['session']}), rings {nxt}")
        n1 = nodes["node1"]
        seed = n1.send("alice", f"number {SEED}", "-s", "ring")
        print(f"seeded  number {SEED} -> alice ({seed['mail_id']})")
        t0 = time.monotonic()
        listing = wait_for(
            lambda: n1.d.ok("mail", "list", "--handle", "operator")["messages"],
            timeout,
            "the ring to come back to the operator on node1",
        )
        got = n1.d.ok("mail", "read", listing[0]["mail_id"], "--handle", "operator")
        elapsed = time.monotonic() - t0
        body = got["body"].strip()
        print(f"collected {body!r} from {got['from']} after {elapsed:.2f}s")
        want = f"number {SEED + len(RING)}"
        if body != want:
            raise ProofFailed(f"collected {body!r}, expected {want!r}")
        if got["from"] != "carol@node2":
            raise ProofFailed(f"the last hop came from {got['from']}, not carol@node2")
        check_trail({k: n.d.events() for k, n in nodes.items()})
        for name, n in nodes.items():
            print(f"\n{name} event trail:")
            print(timeline(n.d.events(), SHOWN))
        print(
            f"\nbridge-proof: ok: {SEED} -> {SEED + len(RING)} through alice -> bob "
            "(node1) -> carol (node2) and back to the operator on node1"
        )
        return 0
    finally:
        for n in nodes.values():
            n.close()
        nats.close()


def check_trail(events: dict[str, list[dict]]) -> None:
    """Each agent woken once, by the hop before it; the cross-node hops forwarded and
    delivered exactly once."""
    want = {"node1": [("alice", "operator"), ("bob", "alice")], "node2": [("carol", "bob@node1")]}
    for node, evs in events.items():
        woken = [(e["handle"], e["from"]) for e in evs if e["kind"] == "agent/woken"]
        if woken != want[node]:
            raise ProofFailed(f"wakes on {node} were {woken}, not {want[node]}")
    fw = [e["to"] for e in events["node1"] if e["kind"] == "bridge/forwarded"]
    dl = [e["from"] for e in events["node1"] if e["kind"] == "bridge/delivered"]
    if fw != ["carol@node2"] or dl != ["carol@node2"]:
        raise ProofFailed(f"node1 forwarded {fw} and had delivered from {dl}")
    fw = [e["to"] for e in events["node2"] if e["kind"] == "bridge/forwarded"]
    dl = [e["from"] for e in events["node2"] if e["kind"] == "bridge/delivered"]
    if fw != ["operator@node1"] or dl != ["bob@node1"]:
        raise ProofFailed(f"node2 forwarded {fw} and had delivered from {dl}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bridge-proof", description=__doc__.split("\n\n")[0])
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for the ring to close")
    args = p.parse_args(argv)
    try:
        return run(args.timeout)
    except (ProofFailed, AssertionError, RuntimeError) as err:
        print(f"\nbridge-proof: FAILED: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nbridge-proof: interrupted; cleaned up", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
