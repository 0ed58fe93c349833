"""Real Claude Code with the claude adapter: its own hooks report to bench.

The scripted model server (tests/real_agents/model_server.py) asks for a Bash call that
the session's permissions do not allow (a real approval prompt), for a long Bash call
(`WORK N`: a turn that lasts while mail arrives), and answers with a subscription's
usage-limit 429 while `limited_until` holds. Each test runs the real TUI in a real pty
under a real daemon, and writes the `bench events` trail it saw to its scratch dir.
"""

import json
import os
import time
from pathlib import Path

import pytest

from tests.real_agents import hooked
from tests.real_agents.hooked import operator_mail, state_after, trail

pytestmark = pytest.mark.slow  # real Claude Code


def start_claude(
    daemon, tmp: Path, name: str, allow: list[str], oauth: bool = False, extra: tuple = ()
):
    """A model server and a real Claude Code session `name` with the claude adapter."""
    server, spec = hooked.start(daemon, tmp, "claude", name)
    settings = tmp / f"home-{name}" / ".claude" / "settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": allow}}))
    env = dict(spec.env)
    if oauth:
        # A usage limit reads as one only to a subscription's login, not an API key.
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        env["CLAUDE_CODE_OAUTH_TOKEN"] = "bench-test-oauth-token"
    s = hooked.spawn(daemon, "claude", name, spec, env, spec.argv, extra)
    daemon.wait_event(
        "agent/state",
        lambda e: e["session"] == s["session"] and e["state"] == "idle",
        timeout=60,
    )
    return server, s


def screen(daemon, name: str) -> str:
    return daemon.bench("tail", name, "--screen").out


def test_real_claude_mail_mid_turn_goes_in_at_its_turns_end(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_claude(daemon, tmp_path, "claude", ["Bash", "Read"])
    try:
        seq = daemon.last_seq()
        daemon.ok("type", "claude", "WORK 6")
        state_after(daemon, "claude", "working", seq)
        sent = daemon.ok("mail", "send", "claude", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "stop-hook", woken  # handed over, not typed
        daemon.wait_until(
            lambda: operator_mail(daemon), 90, "claude's answer to the operator (number 101)"
        )
        # Claude took it as its Stop hook's feedback (the model saw it so), not as a prompt.
        log = (tmp_path / "claude-model.jsonl").read_text()
        assert "Stop hook feedback" in log and woken["path"] in log
        # The turn ended; the agent says idle; it then exits and says so.
        seq = daemon.last_seq()
        daemon.ok("type", "claude", "/exit")
        daemon.wait_event(
            "agent/state", lambda e: e["handle"] == "claude" and e["state"] == "exited", 60, seq
        )
    finally:
        trail(daemon, tmp_path / "trail-door.txt")
        server.shutdown()
        server.server_close()


def test_real_claude_mid_turn_door_hands_mail_over_after_a_tool_call(make_daemon, tmp_path):
    """--mid-turn: mail that arrives during a tool call is added to the context after it
    (PostToolUse's additionalContext), before the turn ends."""
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_claude(daemon, tmp_path, "claude", ["Bash", "Read"], extra=("--mid-turn",))
    try:
        seq = daemon.last_seq()
        daemon.ok("type", "claude", "WORK 5")
        state_after(daemon, "claude", "working", seq)
        sent = daemon.ok("mail", "send", "claude", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "tool-hook", woken
        # The model's next request (the tool's result) carries the wake line.
        daemon.wait_until(
            lambda: woken["path"] in (tmp_path / "claude-model.jsonl").read_text(),
            60,
            "the wake line in a request to the model",
        )
        typed = [e for e in daemon.events(0, "agent/woken") if not e.get("door")]
        assert not typed, typed  # nothing typed
    finally:
        trail(daemon, tmp_path / "trail-mid-turn.txt")
        server.shutdown()
        server.server_close()


def test_real_claude_blocked_approved_denied_limited_parked_delivered(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_claude(daemon, tmp_path, "claude", ["Read"], oauth=True)
    try:
        # Blocked: the operator approves the wake's shell call, then denies the next.
        hooked.approve_then_deny(daemon, "claude")
        # Limited: the model answers with the usage-limit 429 until the next minute
        # after at least 20 s (the screen shows the reset to the minute).
        reset = (
            (int(time.time()) // 60 + 2) * 60
            if time.time() % 60 > 40
            else (int(time.time()) // 60 + 1) * 60
        )
        server.limited_until = reset
        seq = daemon.last_seq()
        daemon.ok("type", "claude", "hello")
        limited = state_after(daemon, "claude", "limited", seq, 90)
        sent = daemon.ok("mail", "send", "claude", "-m", "number 300")
        parked = daemon.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"], 30)
        assert parked["reason"] == "parked"
        status = daemon.bench("mail", "status", sent["mail_id"]).out
        assert "parked" in status, status
        # After the reset: delivered once (typed: the agent is at its prompt), approved.
        seq2 = daemon.last_seq()
        blocked = state_after(daemon, "claude", "blocked", seq2, 200)
        assert blocked["tool"] == "Bash"
        assert time.time() >= reset - 1 or limited["until"] is None
        daemon.ok("approve", "claude")
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 2, 90, "the mail after the reset")
        woken = [e for e in daemon.events(0, "agent/woken") if e["mail_id"] == sent["mail_id"]]
        assert len(woken) == 1, woken
    finally:
        text = trail(daemon, tmp_path / "trail.txt")
        out = os.environ.get("BENCH_TRAIL_OUT")
        if out:
            Path(out).write_text(text + "\n\n--- screen ---\n" + screen(daemon, "claude"))
        server.shutdown()
        server.server_close()
