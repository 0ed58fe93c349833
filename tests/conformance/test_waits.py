"""Waits through the real CLI: `bench mail wait` returning on arrival (the message read
and retired) and at its timeout (exit 6, code timeout); cycles of waits refused at once
with the cycle named, a wait that closes none accepted; `bench job wait`; the limits."""

import json
import os
import subprocess

from tests.conformance.test_jobs import job
from tests.conftest import BENCH, assert_refused, spawn_standin, wait_for


def token_of(d, handle: str) -> str:
    """A session's token, read from its process as any same-user program can."""
    pid = next(
        s["pid"] for s in d.call({"verb": "session/list"})["sessions"] if s["handle"] == handle
    )
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env[b"BENCH_TOKEN"].decode()


def as_(d, handle: str) -> dict:
    return {"BENCH_TOKEN": token_of(d, handle)}


def background(d, *args: str, env: dict | None = None) -> subprocess.Popen:
    e = d.env()
    e.update(env or {})
    return subprocess.Popen(
        [BENCH, *args, "--json"], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(p: subprocess.Popen, timeout: float = 60.0) -> tuple[int, dict]:
    out, _err = p.communicate(timeout=timeout)
    return p.returncode, json.loads(out)


def test_mail_wait_returns_the_mail_that_arrives(daemon):
    spawn_standin(daemon, "alice")
    p = background(daemon, "mail", "wait", "--from", "alice", "--timeout", "60s")
    try:
        daemon.ok("mail", "send", "operator", "-m", "not from alice")
        sent = daemon.ok("mail", "send", "operator", "-m", "from alice", env=as_(daemon, "alice"))
        rc, a = finish(p)
    finally:
        p.kill()
    assert rc == 0, a
    assert a["mail_id"] == sent["mail_id"] and a["from"] == "alice"
    assert a["body"] == "from alice" and a["retired"] is True
    # retired: the other message is still unread, this one is not
    unread = daemon.ok("mail", "list")["messages"]
    assert [x["from"] for x in unread] == ["operator"]


def test_mail_wait_for_a_reply_to_a_message(daemon):
    spawn_standin(daemon, "alice")
    asked = daemon.ok("mail", "send", "alice", "-m", "question")
    p = background(daemon, "mail", "wait", "--reply-to", asked["mail_id"], "--timeout", "60s")
    try:
        daemon.ok("mail", "send", "operator", "-m", "unrelated", env=as_(daemon, "alice"))
        answer = daemon.ok(
            "mail",
            "send",
            "operator",
            "--in-reply-to",
            asked["mail_id"],
            "-m",
            "answer",
            env=as_(daemon, "alice"),
        )
        rc, a = finish(p)
    finally:
        p.kill()
    assert rc == 0 and a["mail_id"] == answer["mail_id"], a


def test_mail_wait_times_out_with_its_own_exit_status(daemon):
    r = daemon.bench("mail", "wait", "--timeout", "300ms", "--json")
    assert_refused(r, "timeout", rc=6)
    r = daemon.bench("mail", "wait", "--timeout", "300ms")
    assert r.rc == 6 and "[timeout]" in r.err
    assert_refused(daemon.bench("mail", "wait", "--timeout", "2h", "--json"), "bad-duration", rc=2)
    assert daemon.bench("mail", "wait", "--timeout", "soon").rc == 2


def test_mail_already_there_ends_the_wait_at_once(daemon):
    daemon.ok("mail", "send", "operator", "-m", "waiting already")
    a = daemon.ok("mail", "wait", "--timeout", "30s")
    assert a["body"] == "waiting already"


def refused_once_open(d, waiting: str, args, env, code="would-deadlock") -> dict:
    """Once `waiting`'s wait is open (its wait/opened event), this wait is refused."""
    d.wait_event("wait/opened", lambda e: e["handle"] == waiting)
    r = d.bench(*args, "--timeout", "1s", "--json", env=env)
    return assert_refused(r, code)


def test_a_cycle_of_three_waits_is_refused_naming_it(shared, who):
    alice, bob, carol = who + "a", who + "b", who + "c"
    for h in (alice, bob, carol):
        spawn_standin(shared, h)
    waits = [
        background(
            shared, "mail", "wait", "--from", bob, "--timeout", "2m", env=as_(shared, alice)
        ),
        background(
            shared, "mail", "wait", "--from", carol, "--timeout", "2m", env=as_(shared, bob)
        ),
    ]
    try:
        for h in (alice, bob):
            shared.wait_event("wait/opened", lambda e, h=h: e["handle"] == h)
        r = shared.bench(
            "mail", "wait", "--from", alice, "--timeout", "1s", "--json", env=as_(shared, carol)
        )
        err = assert_refused(r, "would-deadlock")
        assert f"{carol} -> {alice} -> {bob} -> {carol}" in err["message"], err
        ev = shared.wait_event(
            "wait/refused", lambda e: e["code"] == "would-deadlock" and e["handle"] == carol
        )
        assert ev["cycle"] == [carol, alice, bob, carol]
        # A wait that closes no cycle is accepted (and here ends at its timeout).
        r = shared.bench(
            "mail",
            "wait",
            "--from",
            who + "d",
            "--timeout",
            "300ms",
            "--json",
            env=as_(shared, carol),
        )
        assert_refused(r, "timeout", rc=6)
        # The cycle broken: carol sends to alice (ending alice's wait? no: alice waits on
        # bob); bob sends alice her mail and carol sends bob his: both waits end.
        shared.ok("mail", "send", bob, "-m", "for bob", env=as_(shared, carol))
        shared.ok("mail", "send", alice, "-m", "for alice", env=as_(shared, bob))
        results = [finish(p) for p in waits]
    finally:
        for p in waits:
            p.kill()
    assert [rc for rc, _ in results] == [0, 0]
    assert [a["body"] for _, a in results] == ["for alice", "for bob"]


def test_a_wait_on_yourself_is_a_cycle(daemon):
    r = daemon.bench("mail", "wait", "--from", "operator", "--timeout", "1s", "--json")
    err = assert_refused(r, "would-deadlock")
    assert "operator -> operator" in err["message"]


def test_waits_are_bounded_per_caller(make_daemon):
    d = make_daemon("--session-waits", "1")
    first = background(d, "mail", "wait", "--from", "nobody", "--timeout", "2m")
    try:
        refused_once_open(d, "operator", ("mail", "wait"), None, code="too-many-waits")
        d.wait_event("wait/refused", lambda e: e["code"] == "too-many-waits" and e["limit"] == 1)
    finally:
        first.kill()
        first.communicate()


def test_job_wait_prints_the_reply_and_a_child_waiting_on_its_parent_is_a_cycle(daemon, tmp_path):
    out = tmp_path / "child-wait.json"
    script = (
        "bench mail read >/dev/null 2>&1;"  # the task (from the operator) out of the way
        f"bench mail wait --from operator --timeout 2m --json > {out}; bench report 'all done'"
    )
    job(daemon, tmp_path, "worker", script, reply_to=("operator",))
    # The child waits on the operator; the operator waiting on the child closes the cycle.
    err = refused_once_open(daemon, "worker", ("job", "wait", "worker"), None)
    assert "operator -> worker -> operator" in err["message"]
    p = background(daemon, "job", "wait", "worker", "--timeout", "2m")
    try:
        # The child's wait ends with this mail; then it reports and exits; the job settles.
        daemon.ok("mail", "send", "worker", "-m", "go ahead")
        rc, a = finish(p)
    finally:
        p.kill()
    assert rc == 0, a
    assert a["outcome"] == "completed" and a["reply"] == "all done"
    assert json.loads(out.read_text())["body"] == "go ahead"
    # Settled already: answered at once.
    again = daemon.ok("job", "wait", "worker", "--timeout", "5s")
    assert again["outcome"] == "completed"


def test_job_wait_refusals(shared, who):
    assert_refused(shared.bench("job", "wait", "nobody", "--json"), "no-such-session")
    spawn_standin(shared, who + "a")
    assert_refused(shared.bench("job", "wait", who + "a", "--json"), "no-job")
    spawn_standin(shared, who + "b")
    r = shared.bench("job", "wait", who + "b", "--json", env=as_(shared, who + "a"))
    assert_refused(r, "forbidden")


def test_a_wait_whose_client_leaves_reads_nothing(make_daemon):
    d = make_daemon("--session-waits", "1")
    p = background(d, "mail", "wait", "--timeout", "2m")
    try:
        # It is open once a second wait hits the limit of one.
        refused_once_open(d, "operator", ("mail", "wait"), None, code="too-many-waits")
    finally:
        p.kill()
        p.communicate()
    # Its slot comes back once the daemon sees the client gone ...
    d.wait_until(
        lambda: d.bench("mail", "wait", "--timeout", "200ms", "--json").rc == 6,
        what="the wait's slot freed",
    )
    # ... and mail arriving now is read by nobody: it waits unread.
    sent = d.ok("mail", "send", "operator", "-m", "still unread")
    listed = d.ok("mail", "list")["messages"]
    assert [x["mail_id"] for x in listed] == [sent["mail_id"]]


LOOP = r"""
import json, os, socket, sys, time
me, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(os.environ["BENCH_DIR"], "benchd.sock"))
f = s.makefile("rb")
codes, end, i = {}, time.monotonic() + seconds, 0
waits = [{"from": me, "timeout": 1}, {"from": "nobody", "timeout": 0.001}]
while time.monotonic() < end:
    i += 1
    # A wait on itself (refused), then a wait of 1 ms (opened, then timeout): again.
    req = {"verb": "mail/wait", "id": i, **waits[i % 2]}
    s.sendall(json.dumps(req).encode() + b"\n")
    a = json.loads(f.readline())
    code = "ok" if a.get("ok") else a["error"]["code"]
    codes[code] = codes.get(code, 0) + 1
with open(out + ".tmp", "w") as g:
    json.dump(codes, g)
os.replace(out + ".tmp", out)
"""


def test_a_loop_of_refused_waits_costs_the_event_log_a_line_a_minute(daemon, tmp_path):
    """Finding 11 of the trial: a session looping `mail wait --from <itself>` (raw, as
    fast as the daemon answers) wrote one wait/refused event per refusal: 334,376
    events and 41 MiB in 20 s. Now the flood is one line (with its count) per
    --flood-interval (60 s): the event log grows by a few hundred bytes. The loop
    alternates with a wait of 1 ms (one wait/opened each before), which neither
    restarts the refusals' line nor floods the log itself."""
    import sys

    script, out = tmp_path / "loop.py", tmp_path / "loop.json"
    script.write_text(LOOP)
    log = os.path.join(daemon.dir, "events.jsonl")
    before = os.path.getsize(log)
    daemon.ok(
        "spawn", "--name", "looper", "--", sys.executable, str(script), "looper", "5", str(out)
    )
    wait_for(lambda: out.exists(), 90, "the looper's refusals")
    codes = json.loads(out.read_text())
    assert set(codes) == {"would-deadlock", "timeout"}, codes
    assert min(codes.values()) >= 100, codes
    lines = [e for e in daemon.events(kind="wait/refused") if e["handle"] == "looper"]
    assert len(lines) == 1, len(lines)
    assert lines[0]["cycle"] == ["looper", "looper"] and lines[0]["count"] == 1
    opened = [e for e in daemon.events(kind="wait/opened") if e["handle"] == "looper"]
    assert len(opened) == 1 and opened[0]["on"] == "nobody", opened
    # Everything the session caused: its spawn, its exit, the one refusal line.
    grew = os.path.getsize(log) - before
    print(f"the loop: {codes}; events.jsonl grew {grew} bytes")  # the trial's figures
    assert grew < 4096, f"events.jsonl grew {grew} bytes for {codes} refusals"


def test_only_the_recipients_reply_makes_mail_replied_and_ends_the_wait(daemon):
    """Finding 12 of the trial: a stranger mailed itself with in-reply-to set to
    another's message id: the message became `replied` and its sender's `mail wait
    --reply-to` ended on the stranger's mail. Now only its recipient answers it; the
    stranger's mail is delivered, and its answer says it is not a reply."""
    for h in ("alice", "mallory"):
        spawn_standin(daemon, h)
    asked = daemon.ok("mail", "send", "alice", "-m", "question")
    p = background(daemon, "mail", "wait", "--reply-to", asked["mail_id"], "--timeout", "60s")
    try:
        daemon.wait_event("wait/opened", lambda e: e["handle"] == "operator" and e["on"] == "alice")
        # The stranger's "reply": to itself, and to the waiting sender.
        fake = [
            daemon.ok(
                "mail",
                "send",
                to,
                "--in-reply-to",
                asked["mail_id"],
                "-m",
                "fake answer",
                env=as_(daemon, "mallory"),
            )
            for to in ("mallory", "operator")
        ]
        for a in fake:
            assert "mallory did not receive" in a["not_a_reply"], a
        text = daemon.bench(
            "mail",
            "send",
            "mallory",
            "--in-reply-to",
            asked["mail_id"],
            "-m",
            "again",
            env=as_(daemon, "mallory"),
        )
        assert text.rc == 0 and "not-a-reply" in text.out, text
        assert daemon.ok("mail", "status", asked["mail_id"])["state"] != "replied"
        assert p.poll() is None  # the wait goes on
        # The stranger's mail to the operator was delivered (as mail, not as the reply).
        unread = daemon.ok("mail", "list")["messages"]
        assert [x["mail_id"] for x in unread] == [fake[1]["mail_id"]]
        # The recipient's reply ends it.
        answer = daemon.ok(
            "mail",
            "send",
            "operator",
            "--in-reply-to",
            asked["mail_id"],
            "-m",
            "real answer",
            env=as_(daemon, "alice"),
        )
        assert "not_a_reply" not in answer or answer["not_a_reply"] is None
        rc, a = finish(p)
    finally:
        p.kill()
    assert rc == 0 and a["mail_id"] == answer["mail_id"], a
    st = daemon.ok("mail", "status", asked["mail_id"])
    assert st["state"] == "replied", st
    assert {s["state"]: s for s in st["states"]}["replied"]["reply"] == answer["mail_id"]


def test_waiting_for_a_reply_to_mail_you_received_is_a_cycle(shared, who):
    """Finding 16 of the trial: `mail wait --reply-to` on a message the waiter received
    waits for its own reply (only a recipient answers a message): refused at once as
    would-deadlock, the cycle named, as `mail wait --from <itself>` is."""
    spawn_standin(shared, who)
    got = shared.ok("mail", "send", who, "-m", "for alice")
    r = shared.bench(
        "mail",
        "wait",
        "--reply-to",
        got["mail_id"],
        "--timeout",
        "30s",
        "--json",
        env=as_(shared, who),
    )
    err = assert_refused(r, "would-deadlock")
    assert f"{who} -> {who}" in err["message"], err
    ev = shared.wait_event("wait/refused", lambda e: e["handle"] == who)
    assert ev["code"] == "would-deadlock" and ev["cycle"] == [who, who]
    # A message nobody here knows is no message to wait for.
    r = shared.bench(
        "mail", "wait", "--reply-to", "20261130T045611.123Z-0001", "--timeout", "1s", "--json"
    )
    assert_refused(r, "no-such-message")
