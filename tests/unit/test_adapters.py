"""benchd.runtime.adapters: the command line an adapter session gets (pure)."""

import json

from benchd.runtime import adapters as ad


def test_codex_trust_hash_is_the_one_codex_writes():
    # Codex 0.171 wrote these into a throwaway config.toml when "Trust all and continue"
    # was picked for hooks given with `-c` (key source /<session-flags>/config.toml).
    # SessionEnd and Interrupt are hashed with their timeout clamped to 3 s.
    assert (
        ad.codex_trust_hash("stop", "/tmp/cx/hook.sh Stop", 60)
        == "sha256:dd13ab29a82b8467c7c8a1d8e48834a086e1ac3c55600c1b0519acbc8abec1ca"
    )
    assert (
        ad.codex_trust_hash("session_end", "/tmp/cx/hook.sh SessionEnd", 3)
        == "sha256:e1137b110add50756728e710d039819dd94530d1c3254cda2641dc9bee8961db"
    )


def _pairs(argv: list[str]) -> list[str]:
    assert argv[0::2] == ["-c"] * (len(argv) // 2)
    return argv[1::2]


def test_codex_gets_its_hooks_and_their_trust_after_the_program_only():
    a = ad.adapt("codex", ["env", "A=1", "codex", "--no-daemon"], ["/opt/b/bench", "hook"], 600)
    assert a.adapter == "codex" and a.why_not is None
    assert a.argv[:3] == ["env", "A=1", "codex"] and a.argv[-1] == "--no-daemon"
    sets = _pairs(a.argv[3:-1])
    keys = [s.split("=", 1)[0] for s in sets]
    assert keys == [f"hooks.{e}" for e in ad.CODEX_HOOKS] + ["hooks.state"]
    assert 'command="/opt/b/bench hook stop",timeout=30' in sets[keys.index("hooks.Stop")]
    perm = sets[keys.index("hooks.PermissionRequest")]
    assert "hook permission" in perm and "timeout=630" in perm  # --approval-wait + 30
    assert "timeout=3}" in sets[keys.index("hooks.Interrupt")]
    # Each hook is trusted by its own hash, nothing else.
    state = sets[-1]
    # Codex's own names for its events in its trust keys.
    labels = {
        "UserPromptSubmit": "user_prompt_submit",
        "Stop": "stop",
        "Interrupt": "interrupt",
        "PermissionRequest": "permission_request",
        "SessionEnd": "session_end",
    }
    for theirs, ours in ad.CODEX_HOOKS.items():
        label = labels[theirs]
        timeout = {"permission": 630}.get(ours, ad.CODEX_SHORT.get(theirs, 30))
        digest = ad.codex_trust_hash(label, f"/opt/b/bench hook {ours}", timeout)
        assert json.dumps(f"/<session-flags>/config.toml:{label}:0:0") + "=" in state
        assert json.dumps(digest) in state
    assert "PostToolUse" not in " ".join(sets)


def test_codex_mid_turn_adds_its_post_tool_hook_and_a_wrapper_gets_none():
    a = ad.adapt("codex", ["codex"], ["bench", "hook"], 10, mid_turn=True)
    assert any(s.startswith("hooks.PostToolUse=") and "hook tool" in s for s in a.argv[2::2])
    assert "post_tool_use:0:0" in a.argv[-1]
    w = ad.adapt("codex", ["./my-codex-wrapper"], ["bench", "hook"], 10)
    assert w.adapter is None and w.argv == ["./my-codex-wrapper"]
    assert w.why_not is not None and "codex" in w.why_not
    # pi's adapter needs its program by name: a wrapper gets none either.
    assert ad.adapt("pi", ["run-pi"], ["bench", "hook"], 10).adapter is None
