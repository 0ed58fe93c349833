"""Delegation end to end: a session starts jobs of its own, through the real CLI, from
inside a real session.

The spawner (alice) is an interactive bash in a daemon pty; the operator types each
command into it (`bench type`), so the command runs as alice, exactly as an agent's
shell tool would run it. Each command writes its output and exit code to files the test
waits for; nothing sleeps to synchronise.
"""

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.conformance.test_bridge import nats, nodes, pair  # noqa: F401 - fixtures
from tests.conformance.test_jobs import header, mailbox
from tests.conftest import wait_for
from tests.nodes import have_bridge


class Shell:
    """A bash session (handle `name`) the test types commands into."""

    def __init__(self, d, tmp_path, name: str, spawn_args=()):
        self.d = d
        self.name = name
        self.out = tmp_path / f"out-{name}"
        self.out.mkdir()
        self.n = 0
        self.info = d.ok(
            "spawn", "--name", name, *spawn_args, "--", "bash", "--norc", "--noprofile", "-i"
        )

    def run(self, cmd: str, timeout: float = 60.0) -> tuple[int, str, str]:
        """Run `cmd` inside the session; (exit code, stdout, stderr)."""
        self.n += 1
        base = self.out / str(self.n)
        rc = f"{base}.rc"
        line = (
            f"{{ {cmd} ; }} >{base}.out 2>{base}.err </dev/null; "
            f"echo $? >{rc}.tmp && mv {rc}.tmp {rc}"
        )
        self.d.ok("type", self.name, line)
        wait_for(lambda: os.path.exists(rc), timeout, f"`{cmd}` inside {self.name}")
        with open(rc) as f:
            code = int(f.read())
        return code, Path(f"{base}.out").read_text(), Path(f"{base}.err").read_text()

    def ok(self, cmd: str) -> dict:
        """`cmd` (a bench command, given --json) succeeded: its answer."""
        rc, out, err = self.run(cmd)
        assert rc == 0, (cmd, rc, out, err)
        return json.loads(out)

    def refused(self, cmd: str, code: str) -> dict:
        rc, out, err = self.run(cmd)
        assert rc == 1, (cmd, rc, out, err)
        a = json.loads(out)
        assert a["ok"] is False and a["error"]["code"] == code, (cmd, a)
        assert a["error"]["message"] and "Traceback" not in err
        return a["error"]


def task(tmp_path, text: str = "Do your part.\n", name: str = "task.md") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def spawn_cmd(mail: str, script: str, *opts: str) -> str:
    return (
        f"bench spawn --json --mail {shlex.quote(mail)} {' '.join(opts)} -- "
        f"bash -c {shlex.quote(script)}"
    )


LONG = "bench report 'half done'; exec sleep 600"


def replies(d, handle: str) -> list[dict]:
    """A handle's job replies: in their task's thread, `Re: <task subject> (<outcome>)`."""
    return [x for x in mailbox(d, handle) if x["body"].startswith("---\noutcome: ")]


# ------------------------------------------------------------------ spawning


def test_a_session_spawns_a_job_and_receives_exactly_one_reply(shared, who, tmp_path):
    d = shared
    ah = who
    alice = Shell(d, tmp_path, ah)
    t = task(tmp_path, "Count to three.\n")
    tok = tmp_path / "child-token"
    a = alice.ok(spawn_cmd(t, f'echo "$BENCH_TOKEN" > {tok}; bench report "one two three"'))
    # A fresh handle derived from the spawner's, and the job owes alice its reply.
    assert a["handle"] == ah + ".1"
    delegated = d.wait_event("job/delegated", lambda e: e["child"] == a["session"])
    assert delegated["parent"] == alice.info["session"]
    assert delegated["parent_handle"] == ah and delegated["child_handle"] == ah + ".1"
    assert delegated["reply_to"] == [ah] and delegated["depth"] == 1
    # The task mail is from alice; the child ran with a token of its own.
    (task_mail,) = mailbox(d, ah + ".1")
    assert task_mail["meta"]["from"] == ah and task_mail["body"] == "Count to three.\n"
    assert task_mail["meta"]["reply-to"] == [ah]
    st = d.wait_event("job/settled", lambda e: e["session"] == a["session"])
    assert st["outcome"] == "completed" and st["replies"] == 1
    d.wait_event("outbox/posted", lambda e: e["to"] == ah)
    own = alice.run('echo "$BENCH_TOKEN"')[1].strip()
    assert tok.read_text().strip() not in ("", own)
    (reply,) = replies(d, ah)
    assert reply["meta"]["from"] == ah + ".1"
    assert reply["body"] == header("completed", ah + ".1", a["session"]) + "one two three"
    # The next derived handle skips the one whose mailbox now exists.
    b = alice.ok(spawn_cmd(t, "true"))
    assert b["handle"] == ah + ".2"


def test_a_session_cannot_spawn_a_plain_session_or_claim_a_taken_handle(shared, who, tmp_path):
    d = shared
    ah, bh, ch = who, who + "b", who + "c"
    before = {s["session"] for s in d.ok("ps", "-a")["sessions"]}
    d.ok("spawn", "--name", bh, "--", "sleep", "600")
    d.ok("mail", "send", ch, "-m", "waiting for carol")
    alice = Shell(d, tmp_path, ah)
    t = task(tmp_path)
    err = alice.refused("bench spawn --json --name plain -- sleep 600", "forbidden")
    assert "only jobs" in err["message"]
    err = alice.refused(spawn_cmd(t, "true", "--name", bh), "handle-taken")
    assert "live session" in err["message"]
    err = alice.refused(spawn_cmd(t, "true", "--name", ch), "handle-taken")
    assert "mailbox" in err["message"]
    alice.refused(spawn_cmd(t, "true", "--name", "operator"), "handle-reserved")
    alice.refused(spawn_cmd(t, "true", "--name", ah), "handle-taken")
    # Nothing was spawned, and carol's mail still waits for whoever holds carol.
    # (The module's other tests may have left sessions of their own.)
    handles = {s["handle"] for s in d.ok("ps", "-a")["sessions"] if s["session"] not in before}
    assert handles == {ah, bh}, handles
    assert d.ok("mail", "list", "--handle", ch)["total"] == 1
    assert [e for e in d.events(kind="job/delegated") if e["parent_handle"] == ah] == []


# ------------------------------------------------------------------ authority


def test_a_session_kills_and_cancels_its_own_child_and_touches_nothing_else(shared, who, tmp_path):
    d = shared
    ah, bh, dh = who, who + "b", who + "d"
    t = task(tmp_path)
    bob = Shell(d, tmp_path, bh)
    bobs = bob.ok(spawn_cmd(t, LONG))
    assert bobs["handle"] == bh + ".1"
    d.ok("spawn", "--name", dh, "--", "sleep", "600")
    alice = Shell(d, tmp_path, ah)
    c1 = alice.ok(spawn_cmd(t, LONG))
    d.wait_event("job/reported", lambda e: e["session"] == c1["session"])
    # Its own child: tail, type, kill.
    rc, out, _ = alice.run(f"bench tail {ah}.1 --screen")
    assert rc == 0
    assert alice.ok(f"bench type --json {ah}.1 hello")["bytes"] == 6
    k = alice.ok(f"bench kill --json {ah}.1")
    assert k["session"] == c1["session"]
    st = d.wait_event("job/settled", lambda e: e["session"] == c1["session"])
    assert st["outcome"] == "interrupted" and st["reason"] == "killed"
    d.wait_event("outbox/posted", lambda e: e["to"] == ah)
    (reply,) = replies(d, ah)
    meta = reply["body"].split("---\n")[1]
    assert "outcome: interrupted" in meta and f"killedBy: {ah}" in meta
    assert "reason: killed" in meta
    # Cancel its own child: no reply at all.
    c2 = alice.ok(spawn_cmd(t, LONG))
    d.wait_event("job/reported", lambda e: e["session"] == c2["session"])
    alice.ok(f"bench kill --json --cancel {ah}.2")
    st = d.wait_event("job/settled", lambda e: e["session"] == c2["session"])
    assert st["outcome"] == "cancelled" and st["replies"] == 0
    # Another session, and another session's child: nothing.
    for cmd in (
        f"bench kill --json {dh}",
        f"bench kill --json {bh}.1",
        f"bench kill --json --cancel {bh}.1",
        f"bench tail --json {bh}.1",
        f"bench type --json {bh}.1 x",
        f"bench kill --json --tree {bh}",
    ):
        alice.refused(cmd, "forbidden")
    live = {s["handle"] for s in d.ok("ps")["sessions"]}
    assert {bh, bh + ".1", dh, ah} <= live, live
    # Nor may a child act on its parent or its sibling. (A wake that lands meanwhile
    # retires the reply to read/: compare the messages, not where they sit.)
    same = [(x["meta"], x["body"]) for x in replies(d, ah)]
    assert same == [(reply["meta"], reply["body"])]


# ------------------------------------------------------------------ limits


def test_too_many_children_fires_at_its_value_and_frees_when_a_child_settles(make_daemon, tmp_path):
    d = make_daemon("--max-children", "2")
    hello = d.call({"verb": "hello"})
    assert hello["caps"]["max_children"] == 2
    assert (hello["caps"]["max_depth"], hello["caps"]["spawn_rate"]) == (3, 30)
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    alice.ok(spawn_cmd(t, LONG))
    alice.ok(spawn_cmd(t, LONG))
    err = alice.refused(spawn_cmd(t, LONG), "too-many-children")
    assert "2" in err["message"]
    ev = d.wait_event("job/limited", lambda e: e["code"] == "too-many-children")
    assert ev["handle"] == "alice" and ev["value"] == 2
    with open(os.path.join(d.dir, "benchd.log")) as f:
        assert "delegation limit" in f.read()
    # One settles: the next spawn is allowed.
    alice.ok("bench kill --json alice.1")
    d.wait_event("job/settled", lambda e: e["handle"] == "alice.1")
    assert alice.ok(spawn_cmd(t, LONG))["handle"] == "alice.3"


def test_too_deep_fires_at_its_value(make_daemon, tmp_path):
    d = make_daemon("--max-depth", "1")
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    out, rc = tmp_path / "deep.json", tmp_path / "deep.rc"
    # The child (depth 1) tries to delegate further (depth 2).
    child = f"bench spawn --json --mail {t} -- true > {out}; echo $? > {rc}.tmp; mv {rc}.tmp {rc}"
    alice.ok(spawn_cmd(t, child + "; exec sleep 600"))
    wait_for(rc.exists, 60, "the grandchild's spawn")
    assert rc.read_text().strip() == "1"
    a = json.loads(out.read_text())
    assert a["error"]["code"] == "too-deep"
    ev = d.wait_event("job/limited", lambda e: e["code"] == "too-deep")
    assert ev["handle"] == "alice.1" and ev["value"] == 1


def test_rate_limited_fires_at_its_value_and_settling_does_not_reset_it(make_daemon, tmp_path):
    d = make_daemon("--spawn-rate", "2")
    alice = Shell(d, tmp_path, "alice")
    t = task(tmp_path)
    for _ in range(2):
        a = alice.ok(spawn_cmd(t, "true"))
        d.wait_event("job/settled", lambda e, a=a: e["session"] == a["session"])
    err = alice.refused(spawn_cmd(t, "true"), "rate-limited")
    assert "hour" in err["message"]
    ev = d.wait_event("job/limited", lambda e: e["code"] == "rate-limited")
    assert ev["value"] == 2
    # The limit is per session: another spawner is not affected.
    bob = Shell(d, tmp_path, "bob")
    assert bob.ok(spawn_cmd(t, "true"))["handle"] == "bob.1"


# ------------------------------------------------------------------ the tree


def test_ps_tree_json_parent_and_kill_tree_children_first(daemon, tmp_path):
    d = daemon
    t = task(tmp_path)
    alice = Shell(d, tmp_path, "alice")
    grand = f"bench spawn --json --mail {t} -- sleep 600 > /dev/null; exec sleep 600"
    c1 = alice.ok(spawn_cmd(t, grand))
    c2 = alice.ok(spawn_cmd(t, LONG))
    d.wait_event("job/delegated", lambda e: e["child_handle"] == "alice.1.1")
    rows = {s["handle"]: s for s in d.ok("ps")["sessions"]}
    assert rows["alice"]["parent"] is None
    assert rows["alice.1"]["parent"] == alice.info["session"]
    assert rows["alice.2"]["parent"] == alice.info["session"]
    assert rows["alice.1.1"]["parent"] == c1["session"]
    assert rows["alice.1.1"]["parent_handle"] == "alice.1"
    text = d.bench("ps", "--tree").out.splitlines()
    order = [line.lstrip(" │├└─").split()[0] for line in text[1:]]
    assert order == ["alice", "alice.1", "alice.1.1", "alice.2"], text
    assert text[2].startswith("├─ alice.1") and "running" in text[2]
    assert "└─ alice.1.1" in text[3] and text[4].startswith("└─ alice.2")
    # The operator ends alice's whole tree: deepest first, each job settling normally.
    since = d.last_seq()
    k = d.ok("kill", "--tree", "alice")
    grandchild = rows["alice.1.1"]["session"]
    assert k["ended"][:1] == [grandchild]
    assert set(k["ended"][1:3]) == {c1["session"], c2["session"]}
    assert k["ended"][3] == alice.info["session"]
    exits = [e["handle"] for e in d.events(since, "session/exited")]
    assert exits.index("alice.1.1") < exits.index("alice.1") < exits.index("alice")
    assert exits.index("alice.2") < exits.index("alice")
    for h in ("alice.1.1", "alice.1", "alice.2"):
        st = d.wait_event("job/settled", lambda e, h=h: e["handle"] == h, since=since)
        assert st["outcome"] == "interrupted" and st["replies"] == 1
    assert d.ok("ps")["sessions"] == []
    tree = d.bench("ps", "--tree", "-a").out
    assert "└─ alice.1.1" in tree and "interrupted" in tree


def test_a_session_ends_its_own_subtree_and_is_told_once(shared, who, tmp_path):
    d = shared
    ah = who
    t = task(tmp_path)
    alice = Shell(d, tmp_path, ah)
    grand = f"bench spawn --json --mail {t} -- sleep 600 > /dev/null; exec sleep 600"
    c1 = alice.ok(spawn_cmd(t, grand))
    g = d.wait_event("job/delegated", lambda e: e["child_handle"] == ah + ".1.1")
    k = alice.ok(f"bench kill --json --tree {ah}.1")
    assert k["ended"] == [g["child"], c1["session"]]
    # (The module's other tests may have left sessions of their own: alice's tree only.)
    ps = d.ok("ps")["sessions"]
    live = {s["handle"] for s in ps if s["handle"] == ah or s["handle"].startswith(ah + ".")}
    assert live == {ah}, live
    d.wait_event("outbox/posted", lambda e: e["to"] == ah)
    d.wait_event("outbox/posted", lambda e: e["to"] == ah + ".1")
    (reply,) = replies(d, ah)
    assert f"killedBy: {ah}" in reply["body"] and f"agentId: {ah}.1\n" in reply["body"]
    (grand_reply,) = replies(d, ah + ".1")
    assert f"killedBy: {ah}" in grand_reply["body"]


# ------------------------------------------------------------------ restarts


def test_exited_sessions_are_remembered_across_restarts_until_pruned(daemon, tmp_path):
    d = daemon
    t = task(tmp_path)
    a = d.ok(
        "spawn",
        "--name",
        "worker",
        "--mail",
        t,
        "--reply-to",
        "operator",
        "--",
        "bash",
        "-c",
        "echo 'the output of worker'; bench report done",
    )
    d.wait_event("job/settled", lambda e: e["session"] == a["session"])
    # A session still running at `bench down` is ended by it, and remembered too.
    b = d.ok("spawn", "--name", "sleeper", "--", "bash", "-c", "echo sleeper-was-here; exec cat")
    wait_for(lambda: "sleeper-was-here" in d.bench("tail", "sleeper").out, 30, "its output")
    # The real CLI: bench down, then bench up (which starts a detached daemon).
    assert d.bench("down").rc == 0
    d.proc.wait(30)
    d.stop()
    assert d.bench("up").rc == 0
    try:
        rows = {s["session"]: s for s in d.ok("ps", "-a")["sessions"]}
        row = rows[a["session"]]
        assert row["handle"] == "worker" and row["state"] == "exited" and row["exit"] == 0
        assert row["job"] is True and row["outcome"] == "completed"
        assert rows[b["session"]]["handle"] == "sleeper"
        assert rows[b["session"]]["state"] == "exited"
        r = d.bench("tail", a["session"])
        assert r.rc == 0 and "the output of worker" in r.out, r
        assert "the output of worker" in d.bench("tail", "worker", "--screen").out
        assert "sleeper-was-here" in d.bench("tail", b["session"]).out
        # Twice: what was loaded is kept again.
        assert d.bench("up", "--restart").rc == 0
        assert "the output of worker" in d.bench("tail", a["session"]).out
        assert d.ok("ps", "--prune")["forgotten"] == 2
        assert d.bench("up", "--restart").rc == 0
        assert d.ok("ps", "-a")["sessions"] == []
        assert d.bench("tail", a["session"]).rc == 1
    finally:
        d.bench("down")


def test_the_kept_scrollback_is_bounded(make_daemon, tmp_path):
    d = make_daemon("--kept-scrollback", "1000")
    a = d.ok("spawn", "--name", "big", "--", "bash", "-c", "head -c 5000 /dev/zero | tr '\\0' x")
    d.wait_event("session/exited", lambda e: e["session"] == a["session"])
    d.restart()
    out = d.bench("tail", a["session"]).out
    assert 0 < len(out) <= 1000 and set(out) == {"x"}, len(out)


# ------------------------------------------------------------------ another node


@pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))
def test_a_reply_to_on_another_node_is_answered_there(pair, tmp_path):  # noqa: F811
    n1, n2 = pair
    alice = Shell(n1.d, tmp_path, "alice")
    t = task(tmp_path, "Tell bob on node2.\n")
    a = alice.ok(spawn_cmd(t, "bench report 'for bob'", "--reply-to", "bob@node2"))
    delegated = n1.d.wait_event("job/delegated", lambda e: e["child"] == a["session"])
    assert delegated["reply_to"] == ["bob@node2"]
    st = n1.d.wait_event("job/settled", lambda e: e["session"] == a["session"])
    assert st["outcome"] == "completed" and st["replies"] == 1
    n1.d.wait_event("bridge/forwarded", lambda e: e["to"] == "bob@node2", timeout=60)
    got = n2.d.wait_event("bridge/delivered", lambda e: e["to"] == "bob", timeout=60)
    assert got["from"] == "alice.1@node1" and got["origin"] == "node1"
    (reply,) = mailbox(n2.d, "bob")
    assert reply["body"] == header("completed", "alice.1", a["session"]) + "for bob"
    assert reply["meta"]["from"] == "alice.1@node1"
    assert replies(n1.d, "alice") == []
    # An address on a node never seen is refused before anything is spawned.
    alice.refused(spawn_cmd(t, "true", "--reply-to", "bob@nowhere"), "unknown-node")
