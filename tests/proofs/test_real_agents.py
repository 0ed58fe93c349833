"""`just mail-proof-real`: the ring through real Claude Code, Codex and pi TUIs.

Needs the npm registry (to install the CLIs once into the per-user cache $XDG_CACHE_HOME/bench/agents). Without it the
test is skipped and says why; with it, it must pass.
"""

import pytest

from tests.proofs.test_proofs import run_module
from tests.realagents import agents as realagents


def test_ring_through_real_agents():
    if realagents.installed_bin_dir() is None and not realagents.registry_reachable():
        pytest.skip("the npm registry cannot be reached, so Claude Code, Codex and pi "
                    "cannot be installed on this machine")
    p = run_module("tests.proofs.mail_proof", "--agents", "claude,codex,pi")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "collected 'number 103' from pi" in p.stdout
    for kind in ("claude", "codex", "pi"):
        assert f"{kind} woken:" in p.stdout
        assert f"--- {kind}'s final screen ---" in p.stdout
