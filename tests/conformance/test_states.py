"""Delivery states, seen by the sender through the real CLI: each state reached with
stand-in agents, who may see which, and states kept across a restart and a kill -9."""

import os

from tests.conformance.test_waits import as_
from tests.conftest import assert_refused, spawn_standin


def status(d, mail_id: str, **env) -> dict:
    return d.ok("mail", "status", mail_id, env=env or None)


def states(a: dict) -> dict:
    return {s["state"]: s for s in a["states"]}


def test_no_live_session_then_read_by_a_read(shared, who):
    sent = shared.ok("mail", "send", who, "-m", "hi")
    a = status(shared, sent["mail_id"])
    assert a["from"] == "operator" and a["to"] == who
    got = states(a)
    assert got["delivered"]["at"]
    assert got["not-woken"]["reason"] == "no-live-session"
    assert a["state"] == "not-woken"
    shared.ok("mail", "read", sent["mail_id"], "--handle", who)
    a = shared.wait_until(
        lambda: (x := status(shared, sent["mail_id"]))["state"] == "read" and x,
        what="the read state",
    )
    read = states(a)["read"]
    assert read["by"] == "read" and read["reader"] == "operator"


def test_woken_then_active_then_replied(shared, who, tmp_path):
    spawn_standin(shared, who)
    sent = shared.ok("mail", "send", who, "-m", "wake up")
    mail_id = sent["mail_id"]
    a = shared.wait_until(
        lambda: (x := status(shared, mail_id))["state"] == "active" and x,
        what="the active state",
    )
    got = states(a)
    assert {"delivered", "woken", "read", "active"} <= set(got)
    assert got["read"]["by"] == "wake"
    assert "not-woken" not in got
    # bob answers: the original says replied, naming the reply
    reply = shared.ok(
        "mail", "send", "operator", "--in-reply-to", mail_id, "-m", "done", env=as_(shared, who)
    )
    a = shared.wait_until(
        lambda: (x := status(shared, mail_id))["state"] == "replied" and x,
        what="the replied state",
    )
    assert states(a)["replied"]["reply"] == reply["mail_id"]
    listed = shared.ok("mail", "sent", "--to", who)["messages"]
    assert [(r["mail_id"], r["state"]) for r in listed][0] == (mail_id, "replied")
    only = shared.ok("mail", "sent", "--to", who, "--state", "replied")["messages"]
    assert [r["mail_id"] for r in only] == [mail_id]


def test_capped_wake_says_until_when(make_daemon):
    d = make_daemon("--wake-burst", "1", "--wake-refill", "600")
    spawn_standin(d, "bob")
    first = d.ok("mail", "send", "bob", "-m", "one")
    second = d.ok("mail", "send", "bob", "-m", "two")
    d.wait_event("wake/capped", lambda e: e["mail_id"] == second["mail_id"])
    got = states(status(d, second["mail_id"]))
    assert got["not-woken"]["reason"] == "capped"
    assert got["not-woken"]["until"] > got["not-woken"]["at"]
    d.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"])
    assert "woken" in states(status(d, first["mail_id"]))


def test_operator_typing_holds_the_wake(make_daemon):
    d = make_daemon("--idle-gate", "3")
    spawn_standin(d, "bob")
    d.ok("type", "bob", "x")  # the operator types: the gate holds the next wake
    sent = d.ok("mail", "send", "bob", "-m", "later")
    d.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"])
    got = states(status(d, sent["mail_id"]))
    assert got["not-woken"]["reason"] == "operator-typing"
    d.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    a = status(d, sent["mail_id"])
    assert "woken" in states(a) and a["state"] in ("woken", "active")


def test_read_first_when_read_before_the_wake(make_daemon):
    d = make_daemon("--idle-gate", "30")
    spawn_standin(d, "bob")
    d.ok("type", "bob", "x")  # keeps the gate shut long enough to read first
    sent = d.ok("mail", "send", "bob", "-m", "read me")
    d.ok("mail", "read", sent["mail_id"], "--handle", "bob")
    a = d.wait_until(
        lambda: (x := status(d, sent["mail_id"]))["state"] == "read" and x, what="read"
    )
    got = states(a)
    assert got["read"]["by"] == "read"
    assert got["not-woken"]["reason"] in ("read-first", "operator-typing")


def test_a_session_sees_only_the_states_of_mail_it_sent(shared, who):
    spawn_standin(shared, who)
    mine = shared.ok("mail", "send", who + "c", "-m", "the operator's")
    d = shared
    tok = _token_of(d, who)  # her commands run with it, as an agent's shell would
    r = d.bench("mail", "status", mine["mail_id"], "--json", env={"BENCH_TOKEN": tok})
    assert_refused(r, "no-such-message")
    r = d.bench("mail", "sent", "--from", "operator", "--json", env={"BENCH_TOKEN": tok})
    assert_refused(r, "forbidden")
    hers = d.bench("mail", "send", who + "c", "-m", "alice's", "--json", env={"BENCH_TOKEN": tok})
    assert hers.rc == 0, hers
    listed = d.bench("mail", "sent", "--json", env={"BENCH_TOKEN": tok}).json["messages"]
    assert [x["mail_id"] for x in listed] == [hers.json["mail_id"]]


def _token_of(d, handle: str) -> str:
    """A session's token, read as a same-user process can (its environment)."""
    pid = next(
        s["pid"] for s in d.call({"verb": "session/list"})["sessions"] if s["handle"] == handle
    )
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env[b"BENCH_TOKEN"].decode()


def test_states_survive_a_restart_and_a_kill9(daemon):
    spawn_standin(daemon, "bob")
    a = daemon.ok("mail", "send", "bob", "-m", "one")
    daemon.wait_until(
        lambda: status(daemon, a["mail_id"])["state"] == "active", what="active before restart"
    )
    before = status(daemon, a["mail_id"])
    daemon.restart()
    assert status(daemon, a["mail_id"])["states"] == before["states"]
    b = daemon.ok("mail", "send", "carol", "-m", "two")
    daemon.ok("mail", "read", b["mail_id"], "--handle", "carol")
    kept = status(daemon, b["mail_id"])
    daemon.kill9()  # within the index's commit delay: the log has what the index missed
    daemon.start()
    assert status(daemon, b["mail_id"])["states"] == kept["states"]
    assert status(daemon, a["mail_id"])["states"] == before["states"]


def test_states_rebuilt_when_the_index_is_lost(daemon):
    a = daemon.ok("mail", "send", "carol", "-m", "one")
    daemon.ok("mail", "read", a["mail_id"], "--handle", "carol")
    kept = daemon.wait_until(
        lambda: (x := status(daemon, a["mail_id"]))["state"] == "read" and x, what="read"
    )
    daemon.kill9()
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(daemon.dir, "index.sqlite" + suffix)
        if os.path.exists(path):
            os.unlink(path)
    daemon.start()
    assert status(daemon, a["mail_id"])["states"] == kept["states"]


def test_bad_input_is_refused_with_a_code(shared):
    assert_refused(shared.bench("mail", "status", "nope", "--json"), "bad-id")
    assert_refused(
        shared.bench("mail", "status", "20261130T045611.123Z-0001", "--json"), "no-such-message"
    )
    r = shared.bench("mail", "sent", "--state", "lost")
    assert r.rc == 2
