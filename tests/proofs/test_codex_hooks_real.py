"""Real Codex with the codex adapter: its own hooks report to bench.

Codex (0.171) takes its hooks for one session as `-c hooks.EVENT=[...]` overrides and
runs them once trusted; the adapter passes each hook's trust hash too (`-c
hooks.state=...`), so no review dialog opens and nothing else is trusted. The scripted
model server (tests/real_agents/model_server.py) asks for a long shell call (`WORK N`:
a turn that lasts while mail arrives) and for the ring's `bench mail send`; with
`escalate` it asks to run them outside Codex's sandbox, which under `-a on-request`
is a real approval prompt. Each
test runs the real TUI in a real pty under a real daemon and writes the `bench events`
trail it saw to its scratch dir.
"""

import time
from pathlib import Path

import pytest

from tests.real_agents import hooked
from tests.real_agents.hooked import operator_mail, state_after, trail

pytestmark = pytest.mark.slow  # real Codex


def start_codex(daemon, tmp: Path, name: str, ask: bool = False, extra: tuple = ()):
    """A model server and a real Codex session `name` with the codex adapter; with `ask`,
    every `bench ...` command it runs needs an approval."""
    server, spec = hooked.start(daemon, tmp, "codex", name)
    argv = list(spec.argv)
    if ask:
        server.escalate = True
        argv += ["-a", "on-request", "-s", "workspace-write"]
    s = hooked.spawn(daemon, "codex", name, spec, spec.env, argv, extra)
    # Codex starts its session (and runs SessionStart) at the first prompt, so until
    # then bench knows it by its screen only: its ready footer.
    daemon.wait_until(
        lambda: spec.ready_re.search(daemon.bench("tail", name, "--screen").out),
        60,
        "codex's ready footer",
    )
    return server, s


def say(daemon, name: str, text: str) -> None:
    """Type a line as a paste, then Enter (Codex turns an Enter that follows plain typed
    text at once into a newline; after a bracketed paste it submits)."""
    daemon.ok("type", name, f"\x1b[200~{text}\x1b[201~")


def settled(daemon, name: str, timeout: float = 90) -> None:
    """Wait until the agent says it is idle (its turn over)."""
    daemon.wait_until(
        lambda: any(
            r["handle"] == name and (r.get("agent") or {}).get("state") == "idle"
            for r in daemon.ok("ps")["sessions"]
        ),
        timeout,
        f"{name} idle by its report",
    )


def model_log(tmp: Path, name: str) -> str:
    path = tmp / f"{name}-model.jsonl"
    return path.read_text() if path.exists() else ""


def test_real_codex_idle_is_woken_mid_turn_mail_goes_in_at_its_turns_end(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_codex(daemon, tmp_path, "codex")
    try:
        # Not started yet: the first wake is typed by the screen; its first turn starts
        # Codex's session (SessionStart, UserPromptSubmit) and ends with Stop.
        first = daemon.ok("mail", "send", "codex", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"], 90)
        assert not woken.get("door"), woken  # typed
        state_after(daemon, "codex", "working", woken["seq"] - 5, 90)
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 1, 90, "codex's number 101")
        settled(daemon, "codex")
        (row,) = [r for r in daemon.ok("ps")["sessions"] if r["handle"] == "codex"]
        assert row["agent"]["adapter"] == "codex" and row["agent"]["source"] == "report"
        # Idle by its own report: the next wake is typed (after the short settle).
        sent = daemon.ok("mail", "send", "codex", "-m", "number 150")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert not woken.get("door"), woken
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 2, 90, "codex's number 151")
        settled(daemon, "codex")
        # Mid-turn: the mail waits for its Stop hook, which hands the wake line over.
        seq = daemon.last_seq()
        say(daemon, "codex", "WORK 6")
        state_after(daemon, "codex", "working", seq)
        sent = daemon.ok("mail", "send", "codex", "-m", "number 200")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "stop-hook", woken  # handed over, not typed
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 3, 90, "codex's number 201")
        # Codex gave the line to the model as its Stop hook's prompt, not as typed input.
        log = model_log(tmp_path, "codex")
        assert "<hook_prompt" in log and woken["path"] in log
        typed = [
            e
            for e in daemon.events(seq, "agent/woken")
            if e["mail_id"] == sent["mail_id"] and not e.get("door")
        ]
        assert not typed, typed
        # The handed-over line's turn ends with its own Stop; a prompt typed before that
        # would join the running turn (Codex takes it as more input) and start none.
        settled(daemon, "codex")
        # An interrupted turn (Esc) ends with Interrupt, not Stop: idle again.
        seq = daemon.last_seq()
        say(daemon, "codex", "WORK 30")
        state_after(daemon, "codex", "working", seq)
        daemon.wait_until(
            lambda: "sleep 30" in model_log(tmp_path, "codex"), 60, "the long call asked for"
        )
        daemon.ok("type", "codex", "\x1b", "--no-enter")
        state_after(daemon, "codex", "idle", seq, 60)
        # Exit: its SessionEnd hook reports it.
        seq = daemon.last_seq()
        say(daemon, "codex", "/quit")
        ended = state_after(daemon, "codex", "exited", seq, 60)
        assert ended["source"] == "report", ended
    finally:
        trail(daemon, tmp_path / "trail-door.txt")
        server.shutdown()
        server.server_close()


def test_real_codex_mid_turn_door_hands_mail_over_after_a_tool_call(make_daemon, tmp_path):
    """--mid-turn: mail that arrives during a tool call goes in after it, as context its
    PostToolUse hook adds, before the turn ends."""
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_codex(daemon, tmp_path, "codex", extra=("--mid-turn",))
    try:
        seq = daemon.last_seq()
        say(daemon, "codex", "WORK 5")
        state_after(daemon, "codex", "working", seq, 60)
        sent = daemon.ok("mail", "send", "codex", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "tool-hook", woken
        daemon.wait_until(
            lambda: woken["path"] in model_log(tmp_path, "codex"),
            60,
            "the wake line in a request to the model",
        )
        typed = [e for e in daemon.events(0, "agent/woken") if not e.get("door")]
        assert not typed, typed
    finally:
        trail(daemon, tmp_path / "trail-mid-turn.txt")
        server.shutdown()
        server.server_close()


def test_real_codex_blocked_approved_then_denied(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_codex(daemon, tmp_path, "codex", ask=True)
    try:
        # Blocked: the operator approves the wake's shell call, then denies the next.
        hooked.approve_then_deny(daemon, "codex")
        assert "not now" in model_log(tmp_path, "codex")  # the model was told why
    finally:
        trail(daemon, tmp_path / "trail-approvals.txt")
        server.shutdown()
        server.server_close()


def test_real_codex_dialog_answered_by_its_keys_once_the_hook_gave_up(make_daemon, tmp_path):
    """--approval-wait ran out: Codex's own dialog asks; bench approve types `y`, bench
    deny Escape (Codex then ends the turn with Interrupt)."""
    daemon = make_daemon("--idle-gate", "1.0", "--approval-wait", "1")
    server, s = start_codex(daemon, tmp_path, "codex", ask=True)
    try:
        seq = daemon.last_seq()
        daemon.ok("mail", "send", "codex", "-m", "number 100")
        daemon.wait_event("agent/answered", lambda e: e["by"] == "timeout", 90, since=seq)
        daemon.wait_until(
            lambda: "Would you like to run" in daemon.bench("tail", "codex", "--screen").out,
            30,
            "codex's approval dialog",
        )
        assert daemon.ok("approve", "codex")["via"] == "keys"
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 1, 90, "the approved mail")
        settled(daemon, "codex")
        seq = daemon.last_seq()
        daemon.ok("mail", "send", "codex", "-m", "number 200")
        daemon.wait_event("agent/answered", lambda e: e["by"] == "timeout", 90, since=seq)
        daemon.wait_until(
            lambda: "Would you like to run" in daemon.bench("tail", "codex", "--screen").out,
            30,
            "codex's approval dialog",
        )
        assert daemon.ok("deny", "codex")["via"] == "keys"
        state_after(daemon, "codex", "idle", seq, 60)
        assert len(operator_mail(daemon)) == 1
    finally:
        trail(daemon, tmp_path / "trail-keys.txt")
        server.shutdown()
        server.server_close()


def test_real_codex_limited_by_its_screen_parked_then_delivered_once(make_daemon, tmp_path):
    """Codex runs no hook when a turn ends on its usage limit: the daemon reads the turn's
    end and the limit off its screen (evidence), parks the wakes until the reset time it
    shows, then delivers once."""
    daemon = make_daemon("--idle-gate", "1.0")
    server, s = start_codex(daemon, tmp_path, "codex")
    try:
        first = daemon.ok("mail", "send", "codex", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"], 90)
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 1, 90, "codex's number 101")
        settled(daemon, "codex")
        # The model answers with Codex's usage-limit 429 until a minute boundary at least
        # 20 s away (Codex shows the reset to the minute, in local time).
        now = time.time()
        reset = (int(now) // 60 + (2 if now % 60 > 40 else 1)) * 60
        server.limited_until = reset
        seq = daemon.last_seq()
        say(daemon, "codex", "hello")
        state_after(daemon, "codex", "working", seq)
        limited = state_after(daemon, "codex", "limited", seq, 90)
        assert limited["source"] == "screen", limited
        assert limited["until"] is not None and limited["until"] >= reset * 1000, limited
        sent = daemon.ok("mail", "send", "codex", "-m", "number 300")
        parked = daemon.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"], 30)
        assert parked["reason"] == "parked"
        assert "parked" in daemon.bench("mail", "status", sent["mail_id"]).out
        # After the reset: typed once (it is at its prompt), answered.
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 200)
        assert time.time() >= reset
        daemon.wait_until(lambda: len(operator_mail(daemon)) >= 2, 90, "codex's number 301")
        again = [e for e in daemon.events(0, "agent/woken") if e["mail_id"] == sent["mail_id"]]
        assert len(again) == 1 and not woken.get("door"), again
    finally:
        trail(daemon, tmp_path / "trail-limit.txt")
        server.shutdown()
        server.server_close()


def test_codex_adapter_passes_the_hooks_on_its_command_line_only(make_daemon, tmp_path):
    """ps shows the command as given; the user's config.toml is not touched."""
    daemon = make_daemon()
    server, s = start_codex(daemon, tmp_path, "codex")
    try:
        config = tmp_path / "home-codex" / ".codex" / "config.toml"
        (row,) = [r for r in daemon.ok("ps")["sessions"] if r["handle"] == "codex"]
        assert not any(arg.startswith("hooks.") for arg in row["argv"]), row["argv"]
        assert "hooks" not in config.read_text()
        assert row["agent"] == {"adapter": "codex"}  # no report before its first prompt
    finally:
        server.shutdown()
        server.server_close()
