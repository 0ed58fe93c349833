"""Limits per tree, as a hostile agent meets them: a session and the jobs below it draw
on the budgets of the tree's root (its spawns an hour, its send bucket, its bytes and
new mailboxes an hour), so delegating multiplies nothing; a job's replies meet a full
mailbox and wait in the outbox until it has room; an address listed many times gets
one reply. Each limit is set small by its option; the tests wait on events and files,
never on the clock."""

import os
import shlex

from tests.conformance.test_delegation import Shell, replies, spawn_cmd, task
from tests.conformance.test_jobs import mailbox
from tests.conftest import assert_refused, wait_for


def test_every_tree_budget_is_an_option_in_hellos_caps(make_daemon):
    d = make_daemon("--tree-bytes", "1234", "--tree-mailboxes", "7", "--spawn-rate", "5")
    caps = d.call({"verb": "hello"})["caps"]
    assert (caps["tree_bytes"], caps["tree_mailboxes"], caps["spawn_rate"]) == (1234, 7, 5)


def test_defaults_of_the_tree_budgets(daemon):
    caps = daemon.call({"verb": "hello"})["caps"]
    assert (caps["tree_bytes"], caps["tree_mailboxes"]) == (64 * 1024 * 1024, 100)


def test_a_churning_tree_is_held_to_its_roots_spawn_budget(make_daemon, tmp_path):
    d = make_daemon("--spawn-rate", "3", "--max-children", "10")
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    out = tmp_path / "churn"
    out.mkdir()
    # The child spawns jobs as fast as it can, each of which would spawn more.
    grandchild = f"bench spawn --json --mail {shlex.quote(t)} -- true"
    loop = (
        f"for i in 1 2 3 4 5 6; do {grandchild} > {out}/$i.json; echo $? > {out}/$i.rc; done; "
        f"touch {out}/done; exec sleep 600"
    )
    child = alice.ok(spawn_cmd(t, loop))
    wait_for(lambda: (out / "done").exists(), 60, "the child's spawns")
    codes = [int((out / f"{i}.rc").read_text()) for i in range(1, 7)]
    # alice's own spawn took one of the tree's three: the child got two, then refusals.
    assert codes == [0, 0, 1, 1, 1, 1], codes
    ev = d.wait_event("job/limited", lambda e: e["code"] == "rate-limited")
    assert ev["handle"] == child["handle"] and ev["value"] == 3
    # The root is held to the same budget: its tree has spent it.
    err = alice.refused(spawn_cmd(t, "true"), "rate-limited")
    assert "tree" in err["message"] and "hour" in err["message"]
    # Another tree is not.
    bob = Shell(d, tmp_path, "bob")
    assert bob.ok(spawn_cmd(t, "true"))["handle"] == "bob.1"


def test_a_flooding_tree_is_held_to_its_roots_send_bucket(make_daemon, tmp_path):
    # 30 sends for the whole tree, and one back every 1,000 s: no refill during the test.
    d = make_daemon("--send-burst", "30", "--send-rate", "0.001", "--max-children", "8")
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    out = tmp_path / "flood"
    out.mkdir()
    kids = 4
    for k in range(kids):
        flood = (
            f"until [ -e {out}/go ]; do sleep 0.05; done; for i in $(seq 40); do bench mail send operator -m flood-{k}-$i >/dev/null 2>&1 "
            f"&& echo ok >> {out}/{k}.ok; done; touch {out}/{k}.done; exec sleep 600"
        )
        alice.ok(spawn_cmd(t, flood))  # each spawn: its task mail and its one reply
    (out / "go").touch()  # all four flood at once
    # Meanwhile the operator's own sends all go through.
    for i in range(40):
        d.ok("mail", "send", "carol", "-m", f"operator {i}")
    wait_for(lambda: all((out / f"{k}.done").exists() for k in range(kids)), 120, "floods")
    sent = sum(
        len((out / f"{k}.ok").read_text().split())
        for k in range(kids)
        if (out / f"{k}.ok").exists()
    )
    assert sent == 30 - 2 * kids, sent  # 160 attempts: the tree's bucket, less the spawns
    ev = d.wait_event("limit/hit", lambda e: e.get("budget") == "sends")
    assert ev["tree"] == alice.info["session"] and ev["code"] == "rate-limited"
    # An empty bucket refuses a spawn too: its task mail is a send.
    err = alice.refused(spawn_cmd(t, "true"), "rate-limited")
    assert "alice's tree is sending too fast" in err["message"]
    assert d.ok("mail", "list", "--handle", "carol")["total"] == 40


def test_new_mailboxes_an_hour_are_the_trees(make_daemon, tmp_path):
    d = make_daemon("--tree-mailboxes", "3")
    alice = Shell(d, tmp_path, "alice")
    for h in ("n1", "n2", "n3"):
        alice.ok(f"bench mail send --json {h} -m hello")
    err = alice.refused("bench mail send --json n4 -m hello", "rate-limited")
    assert "new mailboxes" in err["message"] and "--tree-mailboxes" in err["message"]
    ev = d.wait_event("limit/hit", lambda e: e.get("budget") == "mailboxes")
    assert ev["tree"] == alice.info["session"] and ev["limit"] == 3
    alice.ok("bench mail send --json n1 -m again")  # a mailbox already there costs nothing
    # A job's child gets a new mailbox: the spawn is refused as well.
    alice.refused(spawn_cmd(task(tmp_path), "true"), "rate-limited")
    assert not os.path.exists(os.path.join(d.dir, "mail", "n4"))
    d.ok("mail", "send", "n5", "-m", "the operator has no such budget")


def test_bytes_an_hour_are_the_trees(make_daemon, tmp_path):
    d = make_daemon("--tree-bytes", "10000")
    alice = Shell(d, tmp_path, "alice")
    big = tmp_path / "big.txt"
    big.write_text("b" * 4000)
    for _ in range(2):
        alice.ok(f"bench mail send --json bob < {big}")
    err = alice.refused(f"bench mail send --json bob < {big}", "rate-limited")
    assert "bytes of mail" in err["message"] and "--tree-bytes" in err["message"]
    ev = d.wait_event("limit/hit", lambda e: e.get("budget") == "bytes")
    assert ev["tree"] == alice.info["session"] and ev["limit"] == 10000
    alice.ok("bench mail send --json bob -m small")  # what still fits goes
    assert (
        d.bench("mail", "send", "bob", input=big.read_text()).rc == 0
    )  # the operator's bytes are its own


def test_a_jobs_reply_waits_for_room_in_a_full_mailbox(make_daemon, tmp_path):
    d = make_daemon("--mailbox-messages", "3", "--retry-base", "0.2")
    for i in range(3):
        d.ok("mail", "send", "bob", "-m", f"fill {i}")
    t = task(tmp_path)
    job = d.ok("spawn", "--mail", t, "--reply-to", "bob", "--", "bash", "-c", "bench report done")
    d.wait_event("job/settled", lambda e: e["session"] == job["session"])
    retry = d.wait_event("outbox/retry", lambda e: e["to"] == "bob")
    assert retry["code"] == "mailbox-full"
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 3  # never past the cap
    d.ok("mail", "read", "--handle", "bob")  # room for one
    d.wait_event("outbox/posted", lambda e: e["to"] == "bob", timeout=60)
    (reply,) = [x for x in mailbox(d, "bob") if x["meta"]["from"] == job["handle"]]
    assert reply["body"].endswith("done")


def test_sixteen_identical_reply_to_addresses_get_one_copy(daemon, tmp_path):
    d = daemon
    t = task(tmp_path)
    opts = [a for _ in range(16) for a in ("--reply-to", "bob")]
    job = d.ok("spawn", "--mail", t, *opts, "--", "bash", "-c", "bench report once")
    st = d.wait_event("job/settled", lambda e: e["session"] == job["session"])
    assert st["replies"] == 1
    d.wait_event("outbox/posted", lambda e: e["to"] == "bob")
    assert len(replies(d, "bob")) == 1
    # From inside a session too.
    alice = Shell(d, tmp_path, "alice")
    many = " ".join(["--reply-to alice"] * 16)
    a = alice.ok(spawn_cmd(t, "bench report twice", many))
    d.wait_event("job/settled", lambda e: e["session"] == a["session"])
    d.wait_event("outbox/posted", lambda e: e["to"] == "alice")
    assert len(replies(d, "alice")) == 1
    (task_mail,) = mailbox(d, a["handle"])
    assert task_mail["meta"]["reply-to"] == ["alice"]


def test_a_refused_request_spends_nothing(make_daemon, tmp_path):
    d = make_daemon("--tree-bytes", "5000", "--send-burst", "3", "--send-rate", "0.001")
    alice = Shell(d, tmp_path, "alice")
    big = tmp_path / "big.txt"
    big.write_text("b" * 6000)
    alice.refused(f"bench mail send --json bob < {big}", "rate-limited")  # bytes
    for i in range(3):  # the bucket is still whole
        alice.ok(f"bench mail send --json bob -m n{i}")
    r = alice.refused("bench mail send --json bob -m one-more", "rate-limited")
    assert r["retry_after"] > 0
    assert_refused(
        d.call({"verb": "mail/send", "to": "x", "body": "y", "reply_to": ["a"] * 99}),
        "too-many-recipients",
    )


HOLD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support", "holdconns.py")


def test_one_tree_cannot_take_every_connection(make_daemon, tmp_path):
    """Finding 13 of the trial: a tree of sessions held 224 of 256 connections and
    another session's sends were refused. A tree (alice and two jobs of hers) tries to
    hold 48 connections where sessions may hold 40 in all: it gets its budget of 20,
    and another session (bob) and the operator still connect and send."""
    import json
    import sys

    d = make_daemon(
        "--max-connections",
        "48",
        "--operator-reserve",
        "8",
        "--session-connections",
        "16",
        "--tree-connections",
        "20",
        "--flood-interval",
        "3600",
    )
    assert d.call({"verb": "hello"})["caps"]["tree_connections"] == 20
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    outs = [tmp_path / f"hold-{i}.json" for i in range(3)]
    for out in outs[:2]:
        alice.ok(spawn_cmd(t, f"exec {shlex.quote(sys.executable)} {HOLD} 16 {out}"))
    alice.run(f"({shlex.quote(sys.executable)} {HOLD} 16 {outs[2]} &)")
    wait_for(lambda: all(o.exists() for o in outs), 60, "the tree's connections")
    codes = [c for o in outs for c in json.loads(o.read_text())["codes"]]
    # alice's shell holds none while idle; her two `bench spawn` calls ended.
    assert codes.count("ok") == 20, codes
    # The rest refused: the error line, or a broken pipe when the daemon's refusal and
    # close came before the hello was written.
    assert set(codes) <= {"ok", "too-many-connections", "oserror:32"}, codes
    ev = d.wait_event("limit/hit", lambda e: e.get("budget") == "connections:tree")
    assert ev["code"] == "too-many-connections" and ev["limit"] == 20
    assert ev["tree"] == alice.info["session"]
    # One line for the flood of 28 refusals (one source: the tree's budget, per handle).
    lines = [e for e in d.events(kind="limit/hit") if e.get("budget") == "connections:tree"]
    assert len(lines) <= 3, lines
    # Another tree and the operator are not shut out.
    bob = Shell(d, tmp_path, "bob")
    assert bob.ok("bench mail send operator -m 'still here' --json")["to"] == "operator"
    d.ok("mail", "send", "bob", "-m", "and so is the operator")
