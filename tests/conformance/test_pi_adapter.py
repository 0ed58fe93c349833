"""The pi adapter without pi: a session spawned with `--agent pi` loads bench's extension
(benchd/runtime/pi_extension.ts) and reports through it. The agent is the pi stand-in
(tests/standin/pi.js, run by node): it loads the extension as pi does and drives its
events as pi 0.73 does; tests/proofs/test_pi_hooks_real.py runs the real pi."""

import json
import os
import shutil
import time

import pytest

from benchd.runtime import adapters
from tests.support.spawn import program_named, records

STANDIN = os.path.join(os.path.dirname(__file__), "..", "standin", "pi.js")
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the pi stand-in (and pi) run on it"
)


def spawn_pi(daemon, name: str, *extra: str) -> tuple[dict, str]:
    """Spawn the stand-in as `pi` with the pi adapter; wait for its start report."""
    pi = program_named(daemon, "pi", str(NODE), os.path.abspath(STANDIN))
    rec = os.path.join(daemon.scratch, f"{name}.rec")
    s = daemon.ok("spawn", "--name", name, "--agent", "pi", *extra, "--", pi, "--record", rec)
    daemon.wait_event(
        "agent/state", lambda e: e["session"] == s["session"] and e["state"] == "idle"
    )
    return s, rec


def state_after(daemon, name: str, state: str, seq: int, timeout: float = 30) -> dict:
    return daemon.wait_event(
        "agent/state", lambda e: e["handle"] == name and e["state"] == state, timeout, since=seq
    )


def test_the_adapter_adds_the_extension_for_that_session_only():
    bench = "/opt/bench env/bin/bench"  # a path with a space: one argument, never a shell
    hook = [bench, "hook"]
    a = adapters.adapt("pi", ["pi", "--model", "m"], hook, 600)
    assert a.adapter == "pi" and a.why_not is None
    assert a.argv == ["pi", "-e", adapters.PI_EXTENSION, f"--bench-program={bench}", "--model", "m"]
    mid = adapters.adapt("pi", ["env", "A=1", "/usr/bin/pi"], hook, 600, mid_turn=True)
    assert mid.argv[:4] == ["env", "A=1", "/usr/bin/pi", "-e"]
    assert mid.argv[-1] == "--bench-mid-turn=1"
    wrapped = adapters.adapt("pi", ["run-pi.sh"], hook, 600)
    assert wrapped.adapter is None and wrapped.argv == ["run-pi.sh"]
    assert wrapped.why_not is not None and "its extension (-e)" in wrapped.why_not
    assert adapters.adapt("gemini", ["gemini"], hook, 600).adapter is None  # none for it
    # The extension ships in the package (package data), readable where pi runs.
    assert os.path.isfile(adapters.PI_EXTENSION)
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")) as f:
        assert os.path.basename(adapters.PI_EXTENSION) in f.read()


@needs_node
def test_pi_reports_its_turns_and_takes_mail_at_its_turns_end(daemon):
    s, rec = spawn_pi(daemon, "pi1")
    (row,) = [r for r in daemon.ok("ps")["sessions"] if r["handle"] == "pi1"]
    assert row["agent"]["adapter"] == "pi" and row["agent"]["state"] == "idle"
    assert "-e" not in row["argv"]  # shown as given
    with open(rec + ".flags") as f:
        flags = json.load(f)
    # The compiled client when ./run built it beside bench, else bench itself.
    assert flags["bench-program"].endswith(("/bench-hook", "/bench"))
    assert flags["bench-mid-turn"] is False
    # Idle by its own report: typed.
    first = daemon.ok("mail", "send", "pi1", "-m", "one")
    w1 = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"])
    assert w1["door"] is None
    state_after(daemon, "pi1", "idle", w1["seq"])
    # Working: the mail waits for its run's end and goes in through the extension.
    seq = daemon.last_seq()
    daemon.ok("type", "pi1", "work 2")
    state_after(daemon, "pi1", "working", seq)
    sent = daemon.ok("mail", "send", "pi1", "-m", "two")
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "stop-hook"
    got = daemon.wait_until(
        lambda: [r for r in records(rec) if woken["path"] in r["line"]],
        what="the wake handed to pi by the extension",
    )
    assert [r["source"] for r in got] == ["extension"]  # nothing typed for it
    state_after(daemon, "pi1", "idle", woken["seq"])
    status = daemon.ok("mail", "status", sent["mail_id"])
    assert {"woken", "active"} <= {x["state"] for x in status["states"]}
    # A failed run (no limit): idle, no line handed over.
    seq = daemon.last_seq()
    daemon.ok("type", "pi1", "fail")
    working = state_after(daemon, "pi1", "working", seq)
    state_after(daemon, "pi1", "idle", working["seq"])
    # Its end of input: pi quits and says so itself.
    seq = daemon.last_seq()
    daemon.ok("type", "pi1", "\x04", "--no-enter")
    exited = state_after(daemon, "pi1", "exited", seq)
    assert exited["source"] == "report"


@needs_node
def test_pi_limit_parks_mail_until_the_reset_its_message_gives(daemon):
    s, rec = spawn_pi(daemon, "pi2")
    reset = int(time.time()) + 5
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset))
    seq = daemon.last_seq()
    daemon.ok("type", "pi2", f"limit You have hit your usage limit. It resets at {when}.")
    limited = state_after(daemon, "pi2", "limited", seq)
    assert limited["until"] == reset * 1000 and limited["source"] == "report"
    sent = daemon.ok("mail", "send", "pi2", "-m", "parked")
    d = daemon.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"])
    assert d["reason"] == "parked" and d["until"] == reset * 1000
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"], 30)
    assert time.time() >= reset - 0.5 and woken["door"] is None  # typed after the reset
    # pi's own retries inside the limit reported nothing: limited until the wake.
    between = [
        e
        for e in daemon.events(limited["seq"] + 1, "agent/state")
        if e["handle"] == "pi2" and e["seq"] < woken["seq"]
    ]
    assert between == [], between
    daemon.wait_until(lambda: [r for r in records(rec) if woken["path"] in r["line"]], what="taken")
    assert len([r for r in records(rec) if "You have mail" in r["line"]]) == 1


@needs_node
def test_pi_mid_turn_door_steers_mail_in_after_a_tool_call(daemon):
    s, rec = spawn_pi(daemon, "pi3", "--mid-turn")
    with open(rec + ".flags") as f:
        assert json.load(f)["bench-mid-turn"] is True
    seq = daemon.last_seq()
    daemon.ok("type", "pi3", "work 2")
    state_after(daemon, "pi3", "working", seq)
    sent = daemon.ok("mail", "send", "pi3", "-m", "mid")
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "tool-hook"
    got = daemon.wait_until(lambda: [r for r in records(rec) if woken["path"] in r["line"]])
    assert [r["source"] for r in got] == ["steer"]  # in the same run, before its next call
