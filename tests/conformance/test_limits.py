"""The sender limits through the real CLI and a real daemon, each set small by its option:
a sender's send bucket (rate-limited, with a retry-after), a mailbox's unread caps
(mailbox-full; reading and retiring still work) and the reply-to limit
(too-many-recipients, also for a reply's fan-out and a job's reply-to list).

Every limit is reported in hello's caps, and the first refusal of a run is logged in
benchd.log and recorded as a limit/hit event.
"""

import json
import os
import sys

from tests.conftest import ROOT, Benchd, assert_refused, wait_for

INPTY = os.path.join(ROOT, "tests", "reliability", "inpty.py")


def in_session(d, tmp_path, name: str, requests: list[dict]) -> dict:
    """Run `requests` on one connection from inside a real session `name`; its answers."""
    rq, out = tmp_path / f"{name}.req.json", tmp_path / f"{name}.out.json"
    rq.write_text(json.dumps(requests))
    d.ok("spawn", "--name", name, "--", sys.executable, INPTY, str(rq), str(out))
    wait_for(lambda: out.exists(), 60, f"{name}'s answers")
    rec = json.loads(out.read_text())
    assert rec["handle"] == name
    return rec


def log_lines(d, event: str) -> list[dict]:
    with open(os.path.join(d.dir, "benchd.log")) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return [x for x in lines if x.get("event") == event]


def test_every_limit_is_in_hellos_caps(make_daemon):
    d = make_daemon(
        "--send-burst",
        "7",
        "--send-rate",
        "3",
        "--operator-send-burst",
        "70",
        "--operator-send-rate",
        "30",
        "--mailbox-messages",
        "11",
        "--mailbox-bytes",
        "12345",
        "--reply-to-max",
        "4",
    )
    caps = d.call({"verb": "hello"})["caps"]
    assert caps["send_burst"] == 7 and caps["send_rate"] == 3
    assert caps["operator_send_burst"] == 70 and caps["operator_send_rate"] == 30
    assert caps["mailbox_messages"] == 11 and caps["mailbox_bytes"] == 12345
    assert caps["reply_to_max"] == 4


def test_defaults_are_the_documented_ones(daemon):
    caps = daemon.call({"verb": "hello"})["caps"]
    assert (caps["send_burst"], caps["send_rate"]) == (200, 20)
    assert (caps["operator_send_burst"], caps["operator_send_rate"]) == (2000, 200)
    assert (caps["mailbox_messages"], caps["mailbox_bytes"]) == (10_000, 256 * 1024 * 1024)
    assert caps["reply_to_max"] == 16


def test_the_operator_is_rate_limited_with_a_retry_after(make_daemon):
    # One send back every 100 s: the test never waits for a refill.
    d = make_daemon("--operator-send-burst", "3", "--operator-send-rate", "0.01")
    for i in range(3):
        d.ok("mail", "send", "bob", "-m", f"hi {i}")
    r = d.bench("mail", "send", "bob", "-m", "one too many", "--json")
    err = assert_refused(r, "rate-limited", rc=1)
    assert 0 < err["retry_after"] <= 100
    text = d.bench("mail", "send", "bob", "-m", "and another")
    assert text.rc == 1
    assert "[rate-limited]" in text.err and "try again in" in text.err, text
    assert "nothing was sent" in text.err
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 3
    # One event and one log line for the run of refusals, not one per refusal.
    hits = d.wait_event("limit/hit", lambda e: e["code"] == "rate-limited")
    assert hits["sender"] == "operator" and hits["limit"] == 3
    assert len(d.events(kind="limit/hit")) == 1
    lines = [x for x in log_lines(d, "limit hit") if x["code"] == "rate-limited"]
    assert len(lines) == 1 and lines[0]["sender"] == "operator"


def test_a_refused_key_costs_no_send_token(make_daemon):
    d = make_daemon("--operator-send-burst", "2", "--operator-send-rate", "0.01")
    first = d.ok("mail", "send", "bob", "-m", "to reply to")
    for _ in range(3):  # a send and a reply with a key no one may choose: checked first
        r = d.bench("mail", "send", "bob", "-m", "x", "--key", "a\nb", "--json")
        assert_refused(r, "bad-key", rc=1)
        a = d.call({"verb": "mail/reply", "mail_id": first["mail_id"], "body": "x", "key": ""})
        assert a["ok"] is False and a["error"]["code"] == "bad-key", a
    assert d.ok("mail", "send", "bob", "-m", "the burst's second")["mail_id"]
    r = d.bench("mail", "send", "bob", "-m", "one too many", "--json")
    assert_refused(r, "rate-limited", rc=1)


def test_a_flood_meets_the_limit_while_other_agents_still_send(make_daemon, tmp_path):
    d = make_daemon("--send-burst", "5", "--send-rate", "0.01")
    flood = in_session(
        d,
        tmp_path,
        "flood",
        [{"verb": "mail/send", "to": "sink", "body": f"spam {i}"} for i in range(40)],
    )
    ok = [a for a in flood["answers"] if a.get("ok")]
    refused = [a for a in flood["answers"] if not a.get("ok")]
    assert len(ok) == 5, flood["answers"][:8]
    assert len(refused) == 35
    for a in refused:
        assert a["error"]["code"] == "rate-limited", a
        assert a["error"]["retry_after"] > 0
    # Another agent, and the operator, are not held back by the flood.
    calm = in_session(
        d,
        tmp_path,
        "calm",
        [{"verb": "mail/send", "to": "sink", "body": f"work {i}"} for i in range(4)],
    )
    assert all(a.get("ok") for a in calm["answers"]), calm["answers"]
    d.ok("mail", "send", "sink", "-m", "from the operator")
    listing = d.ok("mail", "list", "--handle", "sink", "--limit", "100")
    senders = [x["from"] for x in listing["messages"]]
    assert senders.count("flood") == 5 and senders.count("calm") == 4
    hits = d.events(kind="limit/hit")
    assert [(e["code"], e["sender"]) for e in hits] == [("rate-limited", "flood")]


def test_a_full_mailbox_refuses_and_its_mail_can_still_be_read(make_daemon):
    d = make_daemon("--mailbox-messages", "3", "--mailbox-bytes", "1000")
    ids = [d.ok("mail", "send", "bob", "-m", f"m{i}")["mail_id"] for i in range(3)]
    r = d.bench("mail", "send", "bob", "-m", "fourth", "--json")
    err = assert_refused(r, "mailbox-full", rc=1)
    assert "bob" in err["message"] and "3" in err["message"]
    text = d.bench("mail", "send", "bob", "-m", "fourth")
    assert "[mailbox-full]" in text.err and "nothing was sent" in text.err, text
    # The operator still lists and reads (retires) it; that makes room again.
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 3
    assert d.ok("mail", "read", ids[0], "--handle", "bob")["retired"] is True
    d.ok("mail", "send", "bob", "-m", "fits again")
    assert_refused(d.bench("mail", "send", "bob", "-m", "full again", "--json"), "mailbox-full")
    hit = d.wait_event("limit/hit", lambda e: e["code"] == "mailbox-full")
    assert hit["mailbox"] == "bob" and hit["limit"] == 3
    # Bytes: two bodies of 600 bytes do not fit in 1000.
    d.ok("mail", "send", "carol", "-m", "x" * 600)
    err = assert_refused(
        d.bench("mail", "send", "carol", "-m", "y" * 600, "--json"), "mailbox-full"
    )
    assert "bytes" in err["message"]
    d.ok("mail", "send", "carol", "-m", "y" * 300)
    assert d.ok("mail", "list", "--handle", "carol")["total"] == 2


def test_the_mailbox_limit_counts_mail_from_before_a_restart(make_daemon):
    d = make_daemon("--mailbox-messages", "2")
    d.ok("mail", "send", "bob", "-m", "one")
    d.ok("mail", "send", "bob", "-m", "two")
    d.restart()
    assert_refused(d.bench("mail", "send", "bob", "-m", "three", "--json"), "mailbox-full")


def test_too_many_reply_to_addresses_are_refused(make_daemon, tmp_path):
    d = make_daemon("--reply-to-max", "2")
    ok = d.ok("mail", "send", "bob", "-m", "hi", "--reply-to", "a", "--reply-to", "b")
    assert ok["to"] == "bob"
    args = ["mail", "send", "carol", "-m", "hi"]
    for h in ("a", "b", "c"):
        args += ["--reply-to", h]
    err = assert_refused(d.bench(*args, "--json"), "too-many-recipients", rc=1)
    assert "3" in err["message"] and "2" in err["message"]
    assert not os.path.exists(os.path.join(d.dir, "mail", "carol"))
    hit = d.wait_event("limit/hit", lambda e: e["code"] == "too-many-recipients")
    assert hit["sender"] == "operator" and hit["limit"] == 2
    # A job's reply-to list is held to the same limit (each gets a reply).
    task = tmp_path / "task.md"
    task.write_text("do it\n")
    spawn = ["spawn", "--name", "kid", "--mail", str(task)]
    for h in ("a", "b", "c"):
        spawn += ["--reply-to", h]
    assert_refused(d.bench(*spawn, "--json", "--", "sleep", "30"), "too-many-recipients")
    assert d.events(kind="session/spawned") == []


def test_a_reply_fans_out_to_no_more_than_the_limit(make_daemon):
    # A message written before the limit was lowered asks for replies to 5 handles.
    d = make_daemon()
    args = ["mail", "send", "bob", "-m", "answer all of us"]
    for h in ("a", "b", "c", "d", "e"):
        args += ["--reply-to", h]
    mail_id = d.ok(*args)["mail_id"]
    d.stop()
    d.opts += ["--reply-to-max", "3"]
    d.start()
    r = d.bench("mail", "reply", mail_id, "-m", "to everyone", "--json")
    err = assert_refused(r, "too-many-recipients", rc=1)
    assert "5" in err["message"]
    for h in ("a", "b", "c", "d", "e"):
        assert not os.path.exists(os.path.join(d.dir, "mail", h))


def test_a_reply_spends_one_send_per_recipient(make_daemon):
    d = make_daemon("--operator-send-burst", "3", "--operator-send-rate", "0.01")
    args = ["mail", "send", "bob", "-m", "q"]
    for h in ("a", "b"):
        args += ["--reply-to", h]
    mail_id = d.ok(*args)["mail_id"]  # one send spent; two left, the reply needs two
    assert len(d.ok("mail", "reply", mail_id, "-m", "done")["sent"]) == 2
    err = assert_refused(d.bench("mail", "reply", mail_id, "-m", "again", "--json"), "rate-limited")
    assert err["retry_after"] > 0


def test_bad_limit_options_are_usage_errors(bench_dir):
    b = Benchd(bench_dir, [])
    for flag, value in (("--send-rate", "0"), ("--mailbox-messages", "0"), ("--send-burst", "-1")):
        r = b.bench("up", flag, value)
        assert r.rc == 2, r
        assert flag in r.err, r
