"""Injected disk faults (ENOSPC, EIO) at message delivery, the event-log append and the
journal record (the commit point).

The sender gets a clear refusal (disk-full / io-error; the CLI prints one sentence and
exits 1), nothing half-written becomes visible (no new file in inbox/ or read/, tmp/
empty, no mail/sent event), the idempotency key is not used up, and the daemon keeps
serving once the fault is cleared.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest

from bench_wire.errors import WireError
from tests.conftest import standin_argv
from tests.reliability.common import concurrent_calls, scan_events, scan_mail
from tests.reliability.jobs import arm
from tests.support.refusal import assert_refused

CODES = {"ENOSPC": "disk-full", "EIO": "io-error"}


def snapshot(d) -> tuple[set[str], int]:
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == [], (scan.staged, scan.stray)
    return {m["path"] for m in scan.messages}, len(scan_events(d.dir).events)


def assert_nothing_visible(d, before: tuple[set[str], int], since: int) -> None:
    scan = scan_mail(d.dir)
    assert scan.staged == [], f"staged files left behind: {scan.staged}"
    assert scan.stray == [], scan.stray
    assert {m["path"] for m in scan.messages} == before[0], "a refused message became visible"
    new = [e for e in scan_events(d.dir).events if e["seq"] > since]
    assert [e for e in new if e["kind"] in ("mail/sent", "mail/read")] == [], new


def assert_serving(d) -> None:
    h = d.call({"verb": "hello"})
    assert h.get("ok") is True and h["pid"] == d.proc.pid, h
    assert d.proc.poll() is None


@pytest.mark.parametrize("point", ["deliver", "eventlog", "journal"])
@pytest.mark.parametrize("errno", ["ENOSPC", "EIO"])
def test_a_send_under_a_disk_fault_is_refused_cleanly(daemon, point, errno):
    d = daemon
    code = CODES[errno]
    d.ok("mail", "send", "bob", "-m", "before the fault")  # bob's mailbox exists
    before = snapshot(d)
    since = d.last_seq()

    arm(d, point, errno, 1)
    r = d.bench("mail", "send", "bob", "-s", "hi", "-m", "never half written", "--key", "k1")
    assert r.rc == 1, r
    assert r.out == "", r
    assert f"[{code}]" in r.err and "nothing was written" in r.err, r
    assert r.err.startswith("bench: ") and r.err.count("\n") == 1, r
    assert "Traceback" not in r.err
    assert_nothing_visible(d, before, since)

    # --json gives the same refusal as one JSON object.
    arm(d, point, errno, 1)
    r = d.bench("mail", "send", "bob", "-m", "never half written", "--key", "k1", "--json")
    assert r.rc == 1, r
    a = json.loads(r.out)
    assert_refused(a, code)
    assert_nothing_visible(d, before, since)

    # A mailbox that does not exist yet: no message appears in it either.
    arm(d, point, errno, 1)
    r = d.bench("mail", "send", "newbox", "-m", "x")
    assert r.rc == 1 and f"[{code}]" in r.err, r
    assert_nothing_visible(d, before, since)
    assert d.ok("mail", "list", "--handle", "newbox", "--state", "all")["total"] == 0

    # Cleared (the fault was armed for one write): the daemon serves, and the refused
    # key was not used up — the retry delivers, once.
    assert_serving(d)
    ok = d.ok("mail", "send", "bob", "-s", "hi", "-m", "never half written", "--key", "k1")
    assert ok["duplicate"] is False
    again = d.ok("mail", "send", "bob", "-m", "never half written", "--key", "k1")
    assert again["duplicate"] is True and again["mail_id"] == ok["mail_id"]
    scan = scan_mail(d.dir)
    mine = [m for m in scan.messages if m["meta"]["key"] == "k1"]
    assert len(mine) == 1 and mine[0]["body"] == b"never half written", mine
    assert d.ok("mail", "send", "newbox", "-m", "y")["duplicate"] is False
    sent = [e for e in d.events(since, "mail/sent")]
    assert [e["mail_id"] for e in sent] == [ok["mail_id"], sent[-1]["mail_id"]], sent
    assert scan_events(d.dir).torn == []


@pytest.mark.parametrize("errno", ["ENOSPC", "EIO"])
def test_a_failed_log_append_takes_back_the_whole_batch(daemon, errno):
    """Concurrent senders share a batch: when its log append fails, every message in
    it is refused and none stays visible; the others are delivered normally."""
    d = daemon
    d.ok("mail", "send", "bob", "-m", "warm up")
    before = snapshot(d)
    n = 12
    arm(d, "eventlog", errno, 1)
    results = concurrent_calls(
        d.dir,
        [
            {"verb": "mail/send", "to": "bob", "body": f"body {i}", "key": f"batch-{i}"}
            for i in range(n)
        ],
    )
    failed = [i for i, r in enumerate(results) if not r["ok"]]
    delivered = {i: r for i, r in enumerate(results) if r["ok"]}
    assert failed, "the armed fault refused nothing"
    for i in failed:
        assert_refused(results[i], CODES[errno])
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == []
    on_disk = {m["meta"]["key"]: m for m in scan.messages}
    for i in failed:
        assert f"batch-{i}" not in on_disk, f"refused message {i} is visible"
    for i, r in delivered.items():
        m = on_disk[f"batch-{i}"]
        assert m["meta"]["id"] == r["mail_id"] and m["body"] == f"body {i}".encode()
    assert len(scan.messages) == len(before[0]) + len(delivered)
    sent_ids = {e["mail_id"] for e in d.events(kind="mail/sent")}
    assert {r["mail_id"] for r in delivered.values()} <= sent_ids
    # The refused ones go through when resent, each once.
    for i in failed:
        a = d.call({"verb": "mail/send", "to": "bob", "body": f"body {i}", "key": f"batch-{i}"})
        assert a["ok"] is True and a["duplicate"] is False, a
    assert len(scan_mail(d.dir).messages) == len(before[0]) + n
    assert_serving(d)


@pytest.mark.parametrize("errno", ["ENOSPC", "EIO"])
def test_a_read_under_a_log_fault_leaves_the_message_unread(daemon, errno):
    d = daemon
    sent = d.ok("mail", "send", "bob", "-m", "read me later")
    before = snapshot(d)
    since = d.last_seq()
    arm(d, "eventlog", errno, 1)
    if errno == "ENOSPC":
        # A full disk must not keep anyone from their mail: shown, left unread.
        r = d.bench("mail", "read", sent["mail_id"], "--handle", "bob", "--json")
        assert r.rc == 0 and r.json["body"] == "read me later", r
        assert r.json["retired"] is False, r
    else:
        r = d.bench("mail", "read", sent["mail_id"], "--handle", "bob")
        assert r.rc == 1 and f"[{CODES[errno]}]" in r.err and "Traceback" not in r.err, r
    assert_nothing_visible(d, before, since)
    (msg,) = scan_mail(d.dir).messages
    assert msg["state"] == "inbox", "a refused read retired the message"
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 1
    got = d.ok("mail", "read", sent["mail_id"], "--handle", "bob")
    assert got["body"] == "read me later"
    (msg,) = scan_mail(d.dir).messages
    assert msg["state"] == "read"
    assert_serving(d)


@pytest.mark.parametrize("point", ["deliver", "eventlog", "journal"])
def test_a_persistent_fault_refuses_every_send_and_the_daemon_survives(daemon, point):
    d = daemon
    before = snapshot(d)
    since = d.last_seq()
    arm(d, point, "EIO", 1000)
    with d.connect() as c:
        for i in range(20):
            c.send({"verb": "mail/send", "to": f"h{i % 3}", "body": "x", "key": f"p{i}"})
            a = c.recv()
            assert_refused(a, "io-error")
        assert c.call({"verb": "hello"})["ok"] is True
    assert_nothing_visible(d, before, since)
    arm(d, point, "EIO", 0)
    assert d.ok("mail", "send", "h0", "-m", "x", "--key", "p0")["duplicate"] is False
    assert_serving(d)


def test_a_same_key_retry_beside_a_failed_delivery_never_acks_a_phantom(daemon):
    """A client retrying a key on a second connection while its first attempt is still in
    flight: when both land in one commit batch and the first one's delivery fails, the
    retry must not be answered "duplicate" with the id of a message that was never
    written. Repeated a bounded number of times: the two often share a batch."""
    d = daemon
    phantoms, tries = [], 40
    for t in range(tries):
        arm(d, "deliver", "EIO", 1)
        keys = [f"other-{t}-{i}" for i in range(4)] + [f"same-{t}"] * 2
        answers = concurrent_calls(
            d.dir, [{"verb": "mail/send", "to": "bob", "body": f"b{t}", "key": k} for k in keys]
        )
        arm(d, "deliver", "EIO", 0)
        on_disk = {m["meta"]["key"]: m["meta"]["id"] for m in scan_mail(d.dir).messages}
        for key, a in zip(keys, answers, strict=True):
            if a["ok"] and on_disk.get(key) != a["mail_id"]:
                phantoms.append((key, a["mail_id"], a["duplicate"], a["path"]))
    assert phantoms == [], (
        f"{len(phantoms)} of {tries} rounds acknowledged a message that does not exist "
        f"(key, id, duplicate, path): {phantoms[:5]}"
    )
    assert_serving(d)


# ------------------------------------------------------------------ faults beside the mail


def alive_or_dead(d, fn):
    """A wait condition that also ends (returning "dead") when benchd has died."""

    def cond():
        if d.proc.poll() is not None:
            return "dead"
        try:
            return fn()
        except WireError:
            return None  # it is going away: the next look sees it dead

    return cond


def assert_alive(d) -> None:
    if d.proc.poll() is not None:
        raise AssertionError(
            f"benchd died (exit {d.proc.returncode}): {d.proc.stderr.read()[-3000:]}"
        )
    assert_serving(d)


def test_a_refused_spawn_leaves_no_session_running(daemon):
    """When session/spawned cannot be logged the spawn is refused ("nothing was
    written"): then no session may be left running under that handle."""
    d = daemon
    arm(d, "eventlog", "EIO", 1)
    a = d.call({"verb": "session/spawn", "argv": ["sleep", "600"], "name": "ghost"})
    assert_refused(a, "io-error")
    running = [
        s
        for s in d.call({"verb": "session/list"})["sessions"]
        if s["handle"] == "ghost" and s["state"] == "running"
    ]
    try:
        assert running == [], f"the refused spawn left a running session: {running}"
        again = d.call({"verb": "session/spawn", "argv": ["sleep", "600"], "name": "ghost"})
        assert again["ok"] is True, f"the handle of a refused spawn stays taken: {again}"
    finally:
        for s in running:
            try:
                os.kill(s["pid"], 9)
            except ProcessLookupError:
                pass
    assert_alive(d)


def test_a_log_fault_while_a_wake_lands_does_not_kill_the_daemon(daemon, tmp_path):
    d = daemon
    rec = tmp_path / "agent.rec"
    # The agent waits for one key before it starts (and shows its ready prompt), so the
    # wake cannot land before the fault is armed, however slow the machine.
    gate = "read -n1 _; exec " + " ".join(
        shlex.quote(a) for a in standin_argv("--record", str(rec))
    )
    a = d.call(
        {
            "verb": "session/spawn",
            "name": "agent",
            "ready": "standin>",
            "argv": ["bash", "-c", gate],
        }
    )
    assert a["ok"] is True, a

    def prompt():
        s = d.call({"verb": "session/tail", "handle": "agent", "screen": True})
        return "standin>" in "".join(s.get("lines", []))

    d.ok("mail", "send", "agent", "-m", "first")
    arm(d, "eventlog", "EIO", 1)  # the next append is this wake's agent/woken
    typed = d.call({"verb": "session/type", "handle": "agent", "text": "g", "enter": False})
    assert typed["type"] == "session/type", typed
    d.wait_until(prompt, 30, "the agent's prompt")
    got = d.wait_until(
        alive_or_dead(d, lambda: rec.exists() and rec.read_text().strip()),
        30,
        "the wake to land (or benchd to die)",
    )
    assert got != "dead", (
        f"a failed agent/woken append killed benchd: {d.proc.stderr.read()[-3000:]}"
    )
    assert_alive(d)
    # The reactor still serves this session: the next mail wakes it, and is logged.
    second = d.ok("mail", "send", "agent", "-m", "second")
    d.wait_event("agent/woken", lambda e: e["mail_id"] == second["mail_id"], 30)
    assert_alive(d)


def test_a_log_fault_when_a_session_exits_does_not_kill_the_daemon(daemon):
    d = daemon
    a = d.call({"verb": "session/spawn", "argv": ["sleep", "600"], "name": "brief"})
    assert a["ok"] is True, a
    arm(d, "eventlog", "EIO", 1)  # the next append is its session/exited
    os.kill(a["pid"], 9)

    def settled():
        ps = d.call({"verb": "session/list"})["sessions"]
        return any(s["session"] == a["session"] and s["state"] == "exited" for s in ps)

    got = d.wait_until(alive_or_dead(d, settled), 30, "the session to settle (or benchd to die)")
    assert got != "dead", (
        f"a failed session/exited append killed benchd: {d.proc.stderr.read()[-3000:]}"
    )
    assert_alive(d)
    again = d.call({"verb": "session/spawn", "argv": ["sleep", "600"], "name": "brief"})
    assert again["ok"] is True, again  # the handle was freed
