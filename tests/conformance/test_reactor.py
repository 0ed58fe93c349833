"""The wake reactor end to end: real daemon, real CLI, the stand-in TUI agent in a pty."""

import os
import sys
import time

from tests.conftest import STANDIN, standin_argv
from tests.support.spawn import records

READY = "standin>"


def agent(daemon, name, *extra, ready=READY):
    rec = os.path.join(daemon.scratch, f"{name}.rec")
    args = ["spawn", "--name", name]
    if ready:
        args += ["--ready", ready]
    s = daemon.ok(*args, "--", *standin_argv("--record", rec, *extra))
    return s, rec


def wait_records(daemon, rec, n, timeout=30):
    return daemon.wait_until(
        lambda: len(records(rec)) >= n and records(rec), timeout, f"{n} submitted lines in {rec}"
    )


def test_wake_through_the_relay_path_present_body_absent(shared, who):
    s, rec = agent(shared, who)
    sent = shared.ok("mail", "send", who, "-m", "secret-body-7f3a")
    woken = shared.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["session"] == s["session"] and woken["handle"] == who
    line = wait_records(shared, rec, 1)[0]
    retired = os.path.join(shared.dir, "mail", who, "read", sent["mail_id"] + ".md")
    assert line["line"] == f"You have mail from operator: {retired}"
    assert woken["path"] == retired
    relay = shared.bench("tail", who).out
    assert retired in relay and "secret-body-7f3a" not in relay
    # Retirement at delivery: the message moved to read/ when the wake landed.
    assert os.path.exists(retired)
    assert not os.path.exists(sent["path"])
    assert shared.ok("mail", "list", "--handle", who)["total"] == 0


def test_bracketed_paste_and_a_separate_enter(make_daemon):
    daemon = make_daemon("--paste-settle", "0.3")
    # The agent turns an Enter that arrives within 40 ms of the text into a newline
    # (as Codex does): only a separate, settled Enter submits.
    _, rec = agent(daemon, "bp", "--enter-guard-ms", "40")  # Enter comes 300 ms after
    daemon.ok("mail", "send", "bp", "-m", "x")
    line = wait_records(daemon, rec, 1)[0]
    assert line["pasted"] is True
    assert line["line"].startswith("You have mail from operator: ")
    assert "\n" not in line["line"]


def test_enter_is_retried_never_the_text(shared, who):
    _, rec = agent(shared, who, "--swallow-enters", "1")
    sent = shared.ok("mail", "send", who, "-m", "x")
    retry = shared.wait_event("wake/enter-retried", lambda e: e["handle"] == who)
    assert retry["attempt"] == 1 and retry["mail_id"] == sent["mail_id"]
    line = wait_records(shared, rec, 1)[0]
    # Submitted once, the text exactly once.
    assert line["line"].count("You have mail") == 1
    assert len(records(rec)) == 1


def test_cap_starves_wakes_never_mail(make_daemon):
    d = make_daemon("--wake-burst", "2", "--wake-refill", "3600")
    s, rec = agent(d, "capped")
    ids = [d.ok("mail", "send", "capped", "-m", f"m{i}")["mail_id"] for i in range(5)]
    capped = [d.wait_event("wake/capped", lambda e, i=i: e["mail_id"] == i) for i in ids[2:]]
    assert {c["session"] for c in capped} == {s["session"]}
    wait_records(d, rec, 2)
    d.wait_until(lambda: len(d.events(kind="agent/woken")) == 2, 20, "two wakes")
    woken = {e["mail_id"] for e in d.events(kind="agent/woken")}
    assert woken == set(ids[:2])
    # Every message is there: two retired by their wakes, three unread and safe.
    assert d.ok("mail", "list", "--handle", "capped", "--state", "unread")["total"] == 3
    assert d.ok("mail", "list", "--handle", "capped", "--state", "all")["total"] == 5


def test_digest_when_tokens_return(make_daemon):
    # The refill is wide so the sends and the read below all happen before the token
    # returns, however slow the machine.
    d = make_daemon("--wake-burst", "1", "--wake-refill", "8")
    _, rec = agent(d, "dig")
    with d.connect() as c:
        ids = []
        for i in range(4):
            c.send({"verb": "mail/send", "to": "dig", "body": f"m{i}"})
            ids.append(c.recv()["mail_id"])
    d.wait_event("wake/capped", lambda e: e["mail_id"] == ids[3])
    # One capped message is read meanwhile: the digest must not announce it again.
    d.ok("mail", "read", ids[1], "--handle", "dig")
    lines = wait_records(d, rec, 2, timeout=60)
    assert lines[0]["line"].startswith("You have mail from operator: ")
    assert lines[1]["line"] == "You have 2 unread messages: run bench mail list to see them"
    digest = d.wait_event("agent/woken", lambda e: e["digest"] > 0)
    assert digest["digest"] == 2 and digest["mail_id"] is None
    # Each message announced at most once: the digest did not retire anything.
    assert d.ok("mail", "list", "--handle", "dig")["total"] == 2


def test_idle_gate_holds_a_wake_while_the_agent_prints(make_daemon, tmp_path):
    d = make_daemon("--idle-gate", "0.5")
    stamp = tmp_path / "busy-ended"
    rec = tmp_path / "rec"
    script = (
        f"for i in $(seq 40); do echo busy $i; sleep 0.05; done; "
        f"date +%s.%N > {stamp}; exec {sys.executable} {STANDIN} --record {rec}"
    )
    d.ok("spawn", "--name", "busy", "--ready", READY, "--", "bash", "-c", script)
    d.wait_until(lambda: "busy 1" in d.bench("tail", "busy").out, 20, "busy output")
    d.ok("mail", "send", "busy", "-m", "x")
    line = wait_records(d, rec, 1)[0]
    busy_ended = float(stamp.read_text())
    assert line["t"] >= busy_ended + 0.5


def test_no_wake_while_the_operator_types(make_daemon):
    gate = 1.5  # wide against the typing pace below, so a loaded machine cannot open it
    d = make_daemon("--idle-gate", str(gate))
    _, rec = agent(d, "typist", ready=None)
    d.wait_until(lambda: READY in d.bench("tail", "typist", "--screen").out, 20, "prompt")
    pace = 0.15
    last_typed = 0.0
    with d.connect() as c:

        def key() -> float:
            c.send({"verb": "session/type", "handle": "typist", "text": "k", "enter": False})
            assert c.recv()["type"] == "session/type"
            return time.time()

        key()  # the person is typing before the mail arrives
        c.send({"verb": "mail/send", "to": "typist", "body": "x"})
        assert c.recv()["type"] == "mail/send"
        for _ in range(7):  # a person typing: keystrokes closer together than the gate
            time.sleep(pace)  # the typing rhythm itself, not a wait for the daemon
            last_typed = key()
    line = wait_records(d, rec, 1)[0]
    assert line["t"] >= last_typed + gate
    # The wake lands after the typing stopped (here glued to the unsubmitted keys, as it
    # would be in any TUI: the reactor never erases what a person typed).
    assert line["line"].startswith("k" * 8 + "You have mail from operator: ")


def test_ready_pattern_holds_a_wake_back(shared, who, tmp_path):
    rec = tmp_path / "rec"
    script = f'printf "Allow? [y/n] "; read -n1 a; exec {sys.executable} {STANDIN} --record {rec}'
    shared.ok("spawn", "--name", who, "--ready", READY, "--", "bash", "-c", script)
    shared.wait_until(lambda: "Allow?" in shared.bench("tail", who, "--screen").out, 20, "the menu")
    sent = shared.ok("mail", "send", who, "-m", "x")
    # The menu is quiet but not ready: the wake must wait. Prove it by the mail staying
    # unread until we answer the menu (the wake retires it when it lands).
    answered = time.time()
    assert shared.ok("mail", "list", "--handle", who)["total"] == 1
    shared.ok("type", who, "y", "--no-enter")
    line = wait_records(shared, rec, 1)[0]
    assert line["t"] > answered
    assert line["line"].endswith(sent["mail_id"] + ".md")


def test_a_starting_tui_is_not_woken_before_its_first_output(shared, who):
    # Typed input before raw mode is lost: the wake must wait for the banner.
    _, rec = agent(shared, who, "--startup-delay", "1.0", ready=None)
    sent = shared.ok("mail", "send", who, "-m", "x")
    line = wait_records(shared, rec, 1)[0]
    assert line["line"].endswith(sent["mail_id"] + ".md")


def test_a_dying_session_drops_its_wakes_the_mail_stays(shared, who):
    s, _ = agent(shared, who, "--busy", ready=None)
    sent = shared.ok("mail", "send", who, "-m", "x")
    shared.ok("kill", who)
    shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert not [e for e in shared.events(kind="agent/woken") if e["mail_id"] == sent["mail_id"]]
    listed = shared.ok("mail", "list", "--handle", who)
    assert [m["mail_id"] for m in listed["messages"]] == [sent["mail_id"]]


def test_each_message_is_announced_once(shared, who):
    _, rec = agent(shared, who)
    ids = [shared.ok("mail", "send", who, "-m", f"m{i}")["mail_id"] for i in range(4)]
    lines = wait_records(shared, rec, 4)
    announced = [ln["line"].rsplit("/", 1)[1][:-3] for ln in lines]
    assert sorted(announced) == sorted(ids)
    assert len(set(announced)) == 4


def test_mail_to_a_live_session_says_live(shared, who):
    agent(shared, who)
    sent = shared.ok("mail", "send", who, "-m", "x")
    assert sent["live"] is True and sent["note"] is None
