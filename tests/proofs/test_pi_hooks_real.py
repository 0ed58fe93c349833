"""Real pi with the pi adapter: its bench extension reports to bench for it.

The scripted model server (tests/real_agents/model_server.py) asks for a long bash call
(`WORK N`: a turn that lasts while mail arrives) and answers chat completions with an
OpenAI-shaped usage-limit 429 (its message says when the limit resets) while
`limited_until` holds. Each test runs the real TUI in a real pty under a real daemon
(sandboxed where bwrap works), and writes the `bench events` trail it saw to its scratch
dir.

What reached pi and how is checked by pi itself: each session also loads a small
recording extension (RECORDER) that logs every input pi takes with its `source`
("interactive": typed into its terminal; "extension": handed over by bench's extension).
"""

import json
import os
import re
import time
from pathlib import Path

import pytest

from benchd.runtime.sessions import BUILTIN_PRESETS
from tests.real_agents import hooked
from tests.real_agents.hooked import operator_mail, state_after, stop, trail

pytestmark = pytest.mark.slow  # real pi

# pi's `input` event says where each prompt came from; this logs it as JSON lines.
RECORDER = """\
import { appendFileSync } from "node:fs";

export default function (pi: any) {
  pi.on("input", async (event: any) => {
    const log = process.env.PI_INPUT_LOG;
    if (log) appendFileSync(log, JSON.stringify({ source: event.source, text: event.text }) + "\\n");
  });
}
"""


def start_pi(daemon, tmp: Path, name: str, extra: tuple = ()):
    """A model server and a real pi session `name` with the pi adapter; its input log."""
    server, spec = hooked.start(daemon, tmp, "pi", name)
    recorder = tmp / "recorder.ts"
    recorder.write_text(RECORDER)
    inputs = tmp / f"{name}-inputs.jsonl"
    env = dict(spec.env, PI_INPUT_LOG=str(inputs))
    s = hooked.spawn(daemon, "pi", name, spec, env, [*spec.argv, "-e", str(recorder)], extra)
    daemon.wait_event(
        "agent/state",
        lambda e: e["session"] == s["session"] and e["state"] == "idle",
        timeout=60,
    )
    # pi's extension says idle as its session starts, which on a loaded machine can be
    # before its editor reads the terminal: a line typed then keeps its text and loses
    # its Enter. The tests that type wait for the editor's status line too (a wake
    # needs not: its Enter is checked and retried).
    daemon.wait_until(
        lambda: spec.ready_re.search(daemon.bench("tail", name, "--screen").out),
        60,
        "pi's status line",
    )
    return server, s, inputs


def inputs_of(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_real_pi_woken_idle_then_mail_mid_turn_goes_in_at_its_turns_end(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s, inputs = start_pi(daemon, tmp_path, "pi")
    try:
        row = next(r for r in daemon.ok("ps")["sessions"] if r["handle"] == "pi")
        assert row["agent"]["adapter"] == "pi" and row["agent"]["state"] == "idle"
        assert "--bench-program" not in " ".join(row["argv"])  # shown as given
        # Idle by its own report: the wake is typed; pi says working, then idle.
        seq = daemon.last_seq()
        first = daemon.ok("mail", "send", "pi", "-m", "number 10")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"], 60)
        assert woken["door"] is None, woken  # typed: it was idle at its prompt
        state_after(daemon, "pi", "working", seq)
        daemon.wait_until(lambda: operator_mail(daemon), 90, "pi's answer (number 11)")
        state_after(daemon, "pi", "idle", woken["seq"], 60)
        typed = [i for i in inputs_of(inputs) if woken["path"] in i["text"]]
        assert [i["source"] for i in typed] == ["interactive"], typed
        # Busy: mail that arrives mid-turn waits for its turn's end, then goes in through
        # the extension (pi.sendUserMessage): nothing typed into the terminal.
        seq = daemon.last_seq()
        daemon.ok("type", "pi", "WORK 6")
        state_after(daemon, "pi", "working", seq)
        sent = daemon.ok("mail", "send", "pi", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "stop-hook", woken  # handed over, not typed
        daemon.wait_until(
            lambda: len(operator_mail(daemon)) >= 2, 90, "pi's answer to the operator (101)"
        )
        bodies = [
            daemon.ok("mail", "read", "--handle", "operator", x["mail_id"])["body"]
            for x in operator_mail(daemon)
        ]
        assert any("number 101" in b for b in bodies), bodies
        got = [i for i in inputs_of(inputs) if woken["path"] in i["text"]]
        assert [i["source"] for i in got] == ["extension"], got  # pi took it, not typed
        assert woken["path"] in (tmp_path / "pi-model.jsonl").read_text()
        assert not [e for e in daemon.events(0, "wake/enter-retried")]
        state_after(daemon, "pi", "idle", woken["seq"], 60)
        # An exiting pi says so itself (its extension's `end`), before its process ends.
        seq = daemon.last_seq()
        daemon.ok("type", "pi", "/quit")
        exited = state_after(daemon, "pi", "exited", seq, 60)
        assert exited["source"] == "report", exited
    finally:
        trail(daemon, tmp_path / "trail-door.txt")
        stop(server)


def test_real_pi_mid_turn_door_hands_mail_over_after_a_tool_call(make_daemon, tmp_path):
    """--mid-turn: mail that arrives during a tool call is handed to pi as a steering
    message once the tool's result is in, before its next model call."""
    daemon = make_daemon("--idle-gate", "1.0")
    server, s, inputs = start_pi(daemon, tmp_path, "pi", extra=("--mid-turn",))
    try:
        seq = daemon.last_seq()
        daemon.ok("type", "pi", "WORK 5")
        state_after(daemon, "pi", "working", seq)
        sent = daemon.ok("mail", "send", "pi", "-m", "number 100")
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 90)
        assert woken["door"] == "tool-hook", woken
        daemon.wait_until(lambda: operator_mail(daemon), 90, "pi's answer to the operator")
        got = [i for i in inputs_of(inputs) if woken["path"] in i["text"]]
        assert [i["source"] for i in got] == ["extension"], got
        assert not [e for e in daemon.events(0, "agent/woken") if not e.get("door")]
    finally:
        trail(daemon, tmp_path / "trail-mid-turn.txt")
        stop(server)


def test_real_pi_limited_parks_mail_and_delivers_it_once_after_the_reset(make_daemon, tmp_path):
    daemon = make_daemon("--idle-gate", "1.0")
    server, s, inputs = start_pi(daemon, tmp_path, "pi")
    try:
        # pi retries a 429 by itself (about 14 s of backoff): the limit outlasts that.
        reset = int(time.time()) + 40
        server.limited_until = reset
        seq = daemon.last_seq()
        # pi reports its start before its editor takes typed input: a line typed at once
        # could be lost (a wake waits for the ready footer; `bench type` does not).
        ready = re.compile(BUILTIN_PRESETS["pi"].ready)
        daemon.wait_until(
            lambda: ready.search(daemon.bench("tail", "pi", "--screen").out), 60, "pi's footer"
        )
        daemon.ok("type", "pi", "hello")
        limited = state_after(daemon, "pi", "limited", seq, 90)
        assert limited["until"] == reset * 1000, limited  # from pi's error message
        assert limited["source"] == "report"
        sent = daemon.ok("mail", "send", "pi", "-m", "number 300")
        parked = daemon.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"], 30)
        assert parked["reason"] == "parked" and parked["until"] == reset * 1000
        status = daemon.bench("mail", "status", sent["mail_id"]).out
        assert "parked" in status, status
        # pi's own retries inside the limit leave it limited (no `working` meanwhile).
        woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 120)
        assert time.time() >= reset - 1, "woken before the reset"
        between = [
            e
            for e in daemon.events(limited["seq"], "agent/state")
            if e["handle"] == "pi" and e["seq"] < woken["seq"]
        ]
        assert not between, between
        daemon.wait_until(lambda: operator_mail(daemon), 90, "the mail answered after the reset")
        assert [e for e in daemon.events(0, "agent/woken") if e["mail_id"] == sent["mail_id"]] == [
            woken
        ]
        got = [i for i in inputs_of(inputs) if woken["path"] in i["text"]]
        assert len(got) == 1, got
    finally:
        text = trail(daemon, tmp_path / "trail-limited.txt")
        out = os.environ.get("BENCH_TRAIL_OUT")
        if out:
            Path(out).write_text(text + "\n")
        stop(server)
