"""`just mail-proof-real`: the ring through real Claude Code, Codex and pi TUIs.

Needs the npm registry (to install the CLIs once into the per-user cache $XDG_CACHE_HOME/bench/agents). Without it the
test is skipped and says why; with it, it must pass.
"""

import pytest

from tests.proofs.test_proofs import assert_ring_states, run_module
from tests.real_agents import agents as realagents

pytestmark = pytest.mark.slow  # real Claude Code, Codex and pi TUIs


def test_ring_through_real_agents():
    if realagents.installed_bin_dir() is None and not realagents.registry_reachable():
        pytest.skip(
            "the npm registry cannot be reached, so Claude Code, Codex and pi "
            "cannot be installed on this machine"
        )
    p = run_module("tools.proofs.mail_proof", "--agents", "claude,codex,pi")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103' from pi" in p.stdout
    # Each agent answered the mail that woke it (in-reply-to): every hop but the last
    # ends replied, naming the next.
    assert_ring_states(p.stdout, ("claude", "codex", "pi"))
    for kind in ("claude", "codex", "pi"):
        assert f"{kind} woken:" in p.stdout
        assert f"--- {kind}'s final screen ---" in p.stdout


def test_ring_through_real_agents_via_mcp():
    """Claude Code and Codex with `bench mcp` as their only mail door and no shell tool
    (pi has no MCP client and keeps its shell): the ring still closes."""
    if realagents.installed_bin_dir() is None and not realagents.registry_reachable():
        pytest.skip(
            "the npm registry cannot be reached, so Claude Code, Codex and pi "
            "cannot be installed on this machine"
        )
    p = run_module("tools.proofs.mail_proof", "--agents", "claude,codex,pi", "--via", "mcp")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103' from pi" in p.stdout
    assert_ring_states(p.stdout, ("claude", "codex", "pi"))
    for kind in ("claude", "codex"):
        assert f"{kind} connected to bench mcp" in p.stdout
        assert (
            f"{kind} answered through MCP: mcp__bench__read_mail then "
            "mcp__bench__send_mail (no shell tool offered)"
        ) in p.stdout
    assert "pi answered through MCP" not in p.stdout


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_delegate_proof_with_a_real_agent(kind):
    """alice is a real Claude Code or Codex: its own shell tool runs the delegation."""
    if realagents.installed_bin_dir() is None and not realagents.registry_reachable():
        pytest.skip(
            "the npm registry cannot be reached, so Claude Code and Codex cannot be "
            "installed on this machine"
        )
    p = run_module("tools.proofs.delegate_proof", "--real", kind)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"--- alice's ({kind}) final screen ---" in p.stdout
    assert "delegate-proof: ok" in p.stdout
