"""Mail that waits is announced when its agent arrives (issue 40, defect 1).

A session that claims a handle with unread mail in its inbox is woken for it: one wake
line for one message, the digest for several, under the same idle gate and token bucket
as any wake; with no token, the digest comes when one is back. Real daemon, real CLI,
the stand-in agent recording every line it is given.
"""

import json
import os
import sys

from tests.conftest import STANDIN, Benchd, standin_argv
from tests.support.spawn import records

READY = "standin>"
DIGEST = "You have {} unread messages: run bench mail list to see them"


def wait_records(d, rec, n, timeout=30):
    return d.wait_until(
        lambda: len(records(rec)) >= n and records(rec), timeout, f"{n} submitted lines in {rec}"
    )


def agent(d, name, rec):
    return d.ok("spawn", "--name", name, "--ready", READY, "--", *standin_argv("--record", rec))


def test_one_waiting_message_is_announced_when_its_agent_is_spawned_again(daemon):
    rec = os.path.join(daemon.scratch, "bob.rec")
    first = agent(daemon, "bob", rec)
    daemon.ok("kill", "bob")
    daemon.wait_event("session/exited", lambda e: e["session"] == first["session"])
    sent = daemon.ok("mail", "send", "bob", "-m", "hello while you were out")
    assert sent["live"] is False
    again = agent(daemon, "bob", rec)
    line = wait_records(daemon, rec, 1)[0]
    retired = os.path.join(daemon.dir, "mail", "bob", "read", sent["mail_id"] + ".md")
    assert line["line"] == f"You have mail from operator: {retired}"
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["session"] == again["session"]
    assert daemon.ok("mail", "list", "--handle", "bob")["total"] == 0
    states = [s["state"] for s in daemon.ok("mail", "status", sent["mail_id"])["states"]]
    assert "woken" in states


def test_several_waiting_messages_get_one_digest(daemon):
    rec = os.path.join(daemon.scratch, "bob.rec")
    ids = [daemon.ok("mail", "send", "bob", "-m", f"m{i}")["mail_id"] for i in range(3)]
    agent(daemon, "bob", rec)
    lines = wait_records(daemon, rec, 1)
    assert lines[0]["line"] == DIGEST.format(3)
    digest = daemon.wait_event("agent/woken", lambda e: e["digest"] > 0)
    assert digest["digest"] == 3
    # A digest retires nothing: the three are still unread, each announced once.
    listed = daemon.ok("mail", "list", "--handle", "bob")
    assert sorted(m["mail_id"] for m in listed["messages"]) == sorted(ids)
    daemon.ok("mail", "send", "bob", "-m", "after")
    assert wait_records(daemon, rec, 2)[1]["line"].startswith("You have mail from operator: ")
    assert len(records(rec)) == 2


def test_capped_mail_of_an_earlier_daemon_gets_its_digest_at_claim(make_daemon):
    # The trial: alice's mail capped, then `bench up --restart --wake-burst 50`.
    d = make_daemon("--wake-burst", "1", "--wake-refill", "3600")
    rec = os.path.join(d.scratch, "alice.rec")
    agent(d, "alice", rec)
    ids = [d.ok("mail", "send", "alice", "-m", f"m{i}")["mail_id"] for i in range(3)]
    for i in ids[1:]:
        d.wait_event("wake/capped", lambda e, i=i: e["mail_id"] == i)
    wait_records(d, rec, 1)
    d.stop()
    d2 = make_daemon("--wake-burst", "50")
    agent(d2, "alice", rec)
    lines = wait_records(d2, rec, 2)
    assert lines[1]["line"] == DIGEST.format(2)


def test_waiting_mail_found_without_a_token_gets_the_digest_when_one_is_back(make_daemon):
    refill = 4.0
    d = make_daemon("--wake-burst", "1", "--wake-refill", str(refill))
    rec = os.path.join(d.scratch, "bob.rec")
    first = agent(d, "bob", rec)
    one = d.ok("mail", "send", "bob", "-m", "spends the token")["mail_id"]
    # The token is taken when the mail/sent event reaches the reactor: not before.
    spent = d.wait_event("mail/sent", lambda e: e["mail_id"] == one)
    d.wait_event("agent/woken", lambda e: e["mail_id"] == one)
    # agent/woken says the line was typed; the stand-in records it once it has read it,
    # and a kill right after the wake could come first: wait for its record.
    wait_records(d, rec, 1)
    d.ok("kill", "bob")
    d.wait_event("session/exited", lambda e: e["session"] == first["session"])
    for i in range(2):
        d.ok("mail", "send", "bob", "-m", f"waits {i}")
    agent(d, "bob", rec)
    lines = wait_records(d, rec, 2, timeout=60)
    assert lines[1]["line"] == DIGEST.format(2)
    digest = d.wait_event("agent/woken", lambda e: e["digest"] > 0)
    # Under the same bucket as any wake: not before the token came back.
    assert digest["ts"] - spent["ts"] >= refill * 1000 - 50


def test_bench_up_from_a_team_file_wakes_the_agent_it_starts(bench_dir, tmp_path):
    b = Benchd(bench_dir, [])
    rec = tmp_path / "bob.rec"
    team = tmp_path / "bench.toml"
    team.write_text(
        "[daemon]\nidle-gate = 0.3\npaste-settle = 0.05\n\n[agents.bob]\n"
        f"command = [{json.dumps(sys.executable)}, {json.dumps(STANDIN)}, "
        f'"--record", {json.dumps(str(rec))}]\n'
        f'ready = "{READY}"\n'
    )
    try:
        assert b.bench("up", "-f", str(team)).rc == 0
        b.ok("kill", "bob")
        b.wait_until(
            lambda: not [s for s in b.ok("ps")["sessions"] if s["handle"] == "bob"],
            30,
            "bob gone",
        )
        sent = b.ok("mail", "send", "bob", "-m", "hello while you were out")
        assert sent["live"] is False
        r = b.bench("up", "-f", str(team))
        assert r.rc == 0 and ["started", "bob"] in [x.split()[:2] for x in r.out.splitlines()], r
        line = wait_records(b, rec, 1)[0]
        assert line["line"].endswith(f"/bob/read/{sent['mail_id']}.md")
    finally:
        b.bench("down")  # stops the daemon `bench up` started, and its sessions
