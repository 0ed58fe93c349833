"""The shipped proofs run as part of the suite: `just mail-proof` and `just live-smoke`."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # whole ring proofs, each with its own daemons


def run_module(module: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
    )


def ring_states(stdout: str) -> list[tuple[str, str, set[str]]]:
    """(hop, state shown now, states reached) per message of the proof's states section."""
    section = stdout.split("delivery states (bench mail status")[1]
    out: list[tuple[str, str, set[str]]] = []
    for line in section.splitlines()[1:]:
        words = line.split()
        if not words or not line.startswith("  "):  # the section's lines are indented
            break
        if words[0].startswith("+"):  # `+0.380s  woken ...`: a state of the message above
            out[-1][2].add(" ".join(words[1:]))
        else:  # `alice -> bob  ID  replied`
            out.append((" ".join(words[:3]), words[-1], set()))
    return out


def assert_ring_states(stdout: str, names: tuple[str, ...] = ("alice", "bob", "carol")) -> None:
    """Each hop but the last was woken, retired by its wake and ends replied, naming the
    next hop; the last, to the operator, ends read by the operator's read."""
    states = ring_states(stdout)
    ids = [line.split()[-1] for line in stdout.splitlines() if " mail/sent " in line]
    chain = ["operator", *names, "operator"]
    hops = [f"{a} -> {b}" for a, b in zip(chain, chain[1:], strict=False)]
    assert [h for h, _, _ in states] == hops, stdout
    for (hop, shown, reached), reply in zip(states[:-1], ids[1:], strict=True):
        assert shown == "replied", (hop, stdout)
        assert {"delivered", "woken", "read by wake", f"replied reply {reply}"} <= reached, (
            hop,
            stdout,
        )
    hop, shown, reached = states[-1]
    assert shown == "read", stdout
    assert "read by read, reader operator" in reached, stdout
    assert "not-woken reason no-live-session" in reached, stdout


def test_mail_proof_ring_of_standins():
    p = run_module("tools.proofs.mail_proof")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103'" in p.stdout
    assert_ring_states(p.stdout)
    trail = p.stdout.split("event trail:")[1].split("delivery states")[0]
    kinds = [line.split()[1] for line in trail.strip().splitlines() if line.strip().startswith("+")]
    # An Enter retried (a slow machine: the stand-in had not redrawn within the check)
    # is shown in the trail and is fine; the ring itself must be exact.
    kinds = [k for k in kinds if k != "wake/enter-retried"]
    assert kinds == ["mail/sent", "agent/woken"] * 3 + ["mail/sent", "mail/read"]


def test_mail_proof_from_the_example_team_file():
    # `just mail-proof --file examples/ring.toml`: the ring started by `bench up -f`.
    p = run_module("tools.proofs.mail_proof", "--file", "examples/ring.toml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103'" in p.stdout
    assert "mail-proof: ok: 100 -> 103 through alice -> bob -> carol" in p.stdout
    assert_ring_states(p.stdout)


def test_delegate_proof_trail_shows_values_as_bench_events_does():
    p = run_module("tools.proofs.delegate_proof")
    assert p.returncode == 0, p.stdout + p.stderr
    trail = p.stdout.split("event trail:")[1]
    assert "=False" not in trail and "=True" not in trail and "=['" not in trail, trail
    assert "recovered=false" in trail  # job/settled, as `bench events` prints it
    # Each task alice mailed a child ends replied: the child's reply names it.
    states = p.stdout.split("delivery states (bench mail status")[1]
    heads = [line.split() for line in states.splitlines() if " -> alice." in line]
    assert [(h[2], h[-1]) for h in heads] == [(f"alice.{i}", "replied") for i in range(1, 6)]


def test_mail_proof_fails_loudly(tmp_path):
    # A ring that cannot close (a timeout far too short) exits non-zero with a reason.
    p = run_module("tools.proofs.mail_proof", "--timeout", "0.01")
    assert p.returncode == 1
    assert "mail-proof: FAILED: timed out" in p.stderr


def test_live_smoke_starts_its_own_daemon(tmp_path):
    # An empty BENCH_DIR: no daemon answers there, so live-smoke starts (and stops) one.
    p = run_module("tools.proofs.live_smoke", env={"BENCH_DIR": str(tmp_path / "none")})
    assert p.returncode == 0, p.stdout + p.stderr
    for n in range(1, 8):
        assert f"[{n}]" in p.stdout
    assert "'number 42'" in p.stdout


def test_bridge_proof_ring_across_two_nodes():
    from tests.nodes import have_bridge

    if have_bridge():
        import pytest

        pytest.skip(have_bridge())
    p = run_module("tools.proofs.bridge_proof")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103' from carol@node2" in p.stdout
    assert "bridge-proof: ok" in p.stdout


def test_delegate_proof_alice_delegates_from_her_own_session():
    p = run_module("tools.proofs.delegate_proof")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "alice holds 2 replies, one per child: alice.1 completed, alice.2 completed" in p.stdout
    assert "collected 'alice.3: outcome interrupted, killedBy alice' from alice" in p.stdout
    trail = p.stdout.split("event trail:")[1]
    kinds = [line.split()[1] for line in trail.strip().splitlines() if line.strip().startswith("+")]
    assert kinds.count("job/delegated") == 5 and kinds.count("job/settled") == 5
    assert kinds.count("outbox/posted") == 4  # alice.4 was cancelled: it owes no reply
    # The stall and the deadline, as alice was told them and told the operator.
    assert kinds.count("job/stalled") == 1 and kinds.count("job/deadline") == 1
    assert "collected 'alice.4: stalled, no output and no report' from alice" in p.stdout
    assert "collected 'alice.5: outcome interrupted, reason deadline' from alice" in p.stdout
    assert "delegate-proof: ok" in p.stdout


def test_hostile_trial_every_attack_holds():
    # `just hostile-trial`, shortened: churn, flood, snoop, escape, race and the pattern
    # from inside sessions of a sandboxed daemon with the default limits; then the
    # sandbox's own attacks (f), a second daemon's socket (g) and (11)-(16): refused
    # waits against the event log's bound, a stranger's reply, one tree's connections,
    # planted and unbounded team files, a wait on a reply to mail one received.
    p = run_module(
        "tools.proofs.hostile_trial",
        *("--isolation", "required", "--seconds", "8", "--flood-seconds", "4"),
        *("--race", "40", "--hold", "2", "--refusal-seconds", "4"),
        # A frozen loop took 31 s to answer; 5 s (as test_patterns allows) tells that
        # apart on a machine the suite's other workers load, where 1 s does not.
        *("--latency-limit", "5"),
    )
    if p.returncode == 2 and "cannot be sandboxed" in p.stderr:
        pytest.skip(f"the sandbox cannot run here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "hostile-trial: ok: every attack held" in p.stdout
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines() if line.startswith("(")}
    assert "BROKEN" not in p.stdout
    tokens = rows["(c) other sessions' tokens readable"]
    assert tokens.split()[5] == "0", tokens
    # Each of issue 38's findings 11-16 was tried and printed its figure.
    for n in range(11, 17):
        assert any(r.startswith(f"({n})") for r in rows), f"no row for ({n})"
    assert "would-deadlock" in rows["(16) `mail wait --reply-to` a message one received"]
