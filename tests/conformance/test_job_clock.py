"""A job's ending in one vocabulary, its replies in the task's thread, deadlines and
stalls, end to end through the real daemon, ptys and CLI.

Nothing sleeps to synchronise: the tests wait for events (job/deadline, job/stalled,
job/active, job/settled, outbox/posted) with deadlines. The one wait on the wall clock
(a deadline passing while the daemon is down) polls the clock with a bound.
"""

import json
import os
import time

import pytest

from tests.conformance.test_jobs import job, mailbox, posted_to, settled, spawn_raw, task_file
from tests.support.refusal import assert_refused


def reply_header(body: str) -> dict[str, str]:
    head = body.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines())


def ps_row(d, session: str) -> dict:
    (row,) = [s for s in d.ok("ps", "-a")["sessions"] if s["session"] == session]
    return row


# ------------------------------------------------------------------ one vocabulary


@pytest.mark.parametrize(
    "script,outcome,reason",
    [
        ("bench report done", "completed", None),
        ("bench report 'half'; exit 3", "failed", "exit-code"),
        ("bench report 'half'; exec sleep 600", "interrupted", "killed"),
    ],
    ids=["completed", "failed", "interrupted"],
)
def test_the_same_job_has_the_same_word_everywhere(shared, who, tmp_path, script, outcome, reason):
    """ps --json, the job/settled event, bench ps --tree, the reply's header and subject."""
    d, child, parent = shared, who + "c", who + "p"
    a = job(d, tmp_path, child, script, reply_to=(parent,), subject="count the tests")
    if outcome == "interrupted":
        d.wait_event("job/reported", lambda e: e["session"] == a["session"])
        d.ok("kill", child)
    st = settled(d, child)
    posted_to(d, parent)
    (reply,) = mailbox(d, parent)
    head = reply_header(reply["body"])
    row = ps_row(d, a["session"])
    assert st["outcome"] == row["outcome"] == head["outcome"] == outcome
    assert st["reason"] == row["reason"] == head.get("reason") == reason
    assert reply["meta"]["subject"] == f"Re: count the tests ({outcome})"
    tree = d.bench("ps", "--tree", "-a").out
    (line,) = [x for x in tree.splitlines() if child in x.split()]
    assert f" {outcome} " in line, tree


def test_records_of_an_earlier_version_read_in_todays_words(make_daemon, tmp_path):
    """An exited session kept on disk and a job/settled event, both saying outcome_unknown
    (as earlier versions wrote them), load and show as interrupted, daemon-stopped."""
    d = make_daemon(start=False)
    old = {
        "session": "s0dd0dd00",
        "handle": "old",
        "pid": 4242,
        "exit": None,
        "signal": None,
        "argv": ["sleep", "600"],
        "job": True,
        "reply_to": ["parent"],
        "outcome": "outcome_unknown",
        "size": [40, 120],
        "ended_ms": 1,
    }
    where = os.path.join(d.dir, "sessions", old["session"])
    os.makedirs(where, mode=0o700)
    with open(os.path.join(where, "info.json"), "w") as f:
        json.dump(old, f)
    with open(os.path.join(where, "output"), "wb") as f:
        f.write(b"bye\r\n")
    d.start()
    row = ps_row(d, "s0dd0dd00")
    assert (row["outcome"], row["reason"]) == ("interrupted", "daemon-stopped")
    assert " interrupted " in d.bench("ps", "--tree", "-a").out
    # An old job/settled line in the log.
    d.stop()
    with open(os.path.join(d.dir, "events.jsonl"), "rb") as f:
        last = json.loads(f.read().splitlines()[-1])
    line = {
        "seq": last["seq"] + 1,
        "ts": last["ts"],
        "kind": "job/settled",
        "session": "s0dd0dd00",
        "handle": "old",
        "key": "job-s0dd0dd00",
        "outcome": "outcome_unknown",
        "replies": 1,
        "recovered": True,
    }
    with open(os.path.join(d.dir, "events.jsonl"), "a") as f:
        f.write(json.dumps(line, separators=(",", ":")) + "\n")
    d.start()
    (ev,) = [e for e in d.events(kind="job/settled") if e["session"] == "s0dd0dd00"]
    assert (ev["outcome"], ev["reason"]) == ("interrupted", "daemon-stopped")
    text = d.bench("events", "--kind", "job/settled").out
    assert "outcome=interrupted" in text and "outcome_unknown" not in text


# ------------------------------------------------------------------ the thread


def test_a_reply_is_in_its_tasks_thread(shared, who, tmp_path):
    d, child, parent = shared, who + "c", who + "p"
    a = job(d, tmp_path, child, "bench report 'three tests'", (parent,), subject="count the tests")
    posted_to(d, parent)
    (reply,) = mailbox(d, parent)
    assert reply["meta"]["in-reply-to"] == a["mail_id"]
    assert reply["meta"]["subject"] == "Re: count the tests (completed)"
    assert reply_header(reply["body"])["outcome"] == "completed"
    thread = d.ok("mail", "thread", a["mail_id"])
    got = [(x["mail_id"], x["subject"]) for x in thread["messages"]]
    assert got == [
        (a["mail_id"], "count the tests"),
        (reply["meta"]["id"], "Re: count the tests (completed)"),
    ], got
    text = d.bench("mail", "thread", a["mail_id"]).out
    assert "Re: count the tests (completed)" in text


# ------------------------------------------------------------------ deadlines


def test_a_deadline_ends_the_job_and_its_reply_says_so(shared, who, tmp_path):
    """A child that ignores SIGHUP and SIGTERM is still ended (SIGKILL after the grace)."""
    d, slow, slow2, parent = shared, who + "s", who + "t", who + "p"
    script = "trap '' HUP TERM; bench report 'got halfway'; while :; do sleep 1; done"
    mail = task_file(tmp_path, "Take your time.\n")
    r = spawn_raw(d, ["bash", "-c", script], name=slow, mail=mail, reply_to=(parent,))
    assert r.rc == 0, r
    r = d.bench("spawn", "--json", "--deadline", "2s", "--name", slow2, "--mail", mail,
                "--reply-to", parent, "--", "bash", "-c", script)  # fmt: skip
    assert r.rc == 0, r
    a = r.json
    ev = d.wait_event("job/deadline", lambda e: e["session"] == a["session"], 30)
    assert ev["handle"] == slow2 and ev["recovered"] is False and ev["deadline_ms"] > 0
    st = settled(d, slow2)
    assert (st["outcome"], st["reason"]) == ("interrupted", "deadline")
    posted_to(d, parent)
    (reply,) = [x for x in mailbox(d, parent) if f"agentId: {slow2}\n" in x["body"]]
    head = reply_header(reply["body"])
    assert head["outcome"] == "interrupted" and head["reason"] == "deadline"
    assert head["signal"] == "SIGKILL", head  # it ignored HUP and TERM
    assert reply["body"].endswith("got halfway")
    row = ps_row(d, a["session"])
    assert (row["outcome"], row["reason"]) == ("interrupted", "deadline")
    # The job without a deadline is still running.
    assert any(s["handle"] == slow for s in d.ok("ps")["sessions"])
    d.ok("kill", slow, "--cancel")


def test_ps_shows_the_time_left(shared, who, tmp_path):
    d = shared
    mail = task_file(tmp_path)
    r = d.bench("spawn", "--json", "--deadline", "1h", "--name", who, "--mail", mail,
                "--", "sleep", "600")  # fmt: skip
    assert r.rc == 0, r
    row = ps_row(d, r.json["session"])
    assert 3_000_000 < row["deadline_left_ms"] <= 3_600_000
    text = d.bench("ps").out
    assert "LEFT" in text.splitlines()[0]
    line = next(x for x in text.splitlines() if x.startswith(f"{who} "))
    assert " 59m " in line or " 1h " in line, line
    d.ok("kill", who, "--cancel")


@pytest.mark.parametrize(
    "value,code",
    [("0s", "bad-duration"), ("8d", "bad-duration"), ("soon", "usage"), ("-5m", "usage")],
)
def test_a_bad_deadline_is_refused_before_anything_starts(shared, who, tmp_path, value, code):
    d = shared
    mail = task_file(tmp_path)
    since = d.last_seq()
    before = {s["session"] for s in d.ok("ps", "-a")["sessions"]}
    r = d.bench("spawn", "--json", "--deadline", value, "--name", who, "--mail", mail, "--", "true")
    # With --json a usage error is JSON on stdout too, as every error is.
    err = assert_refused(r, code, rc=2)
    assert "Traceback" not in r.err
    if code == "usage":
        assert "is not a duration" in err["message"], r
    # Nothing started (the module's other tests may have left sessions of their own).
    assert [s for s in d.ok("ps", "-a")["sessions"] if s["session"] not in before] == []
    assert d.events(since, kind="session/spawned") == []


def test_a_deadline_that_passed_while_the_daemon_was_down(make_daemon, tmp_path):
    """Stored with the job: at start a job past its deadline settles with reason deadline
    (its job/deadline says recovered), one still within it as daemon-stopped."""
    d = make_daemon()
    mail = task_file(tmp_path)
    r = d.bench("spawn", "--json", "--deadline", "6s", "--name", "due", "--mail", mail,
                "--reply-to", "parent", "--", "sleep", "600")  # fmt: skip
    assert r.rc == 0, r
    due = r.json
    r = d.bench("spawn", "--json", "--deadline", "1h", "--name", "later", "--mail", mail,
                "--reply-to", "parent", "--", "sleep", "600")  # fmt: skip
    assert r.rc == 0, r
    later = r.json
    left = ps_row(d, due["session"])["deadline_left_ms"]
    passes_at = time.time() + left / 1000
    d.kill9()
    with open(os.path.join(d.dir, "events.jsonl"), "rb") as f:
        assert b'"job/deadline"' not in f.read(), "the deadline fired before the kill"
    d.wait_until(lambda: time.time() > passes_at + 0.2, 30, "the deadline to pass")
    d.start()
    ev = d.wait_event("job/deadline", lambda e: e["session"] == due["session"])
    assert ev["recovered"] is True
    st = settled(d, "due")
    assert (st["outcome"], st["reason"]) == ("interrupted", "deadline")
    st = settled(d, "later")
    assert (st["outcome"], st["reason"]) == ("interrupted", "daemon-stopped")
    assert [e["session"] for e in d.events(kind="job/deadline")] == [due["session"]]
    posted_to(d, "parent")
    d.wait_until(lambda: len(mailbox(d, "parent")) == 2, 30, "both replies")
    heads = {reply_header(x["body"])["sessionId"]: x for x in mailbox(d, "parent")}
    assert reply_header(heads[due["session"]]["body"])["reason"] == "deadline"
    assert reply_header(heads[later["session"]]["body"])["reason"] == "daemon-stopped"
    for a in (due, later):
        try:
            os.kill(a["pid"], 9)
        except ProcessLookupError:
            pass


# ------------------------------------------------------------------ stalls


def stall_job(
    d, tmp_path, script: str, name: str = "quiet", stall: str = "1s", parent: str = "parent"
) -> dict:
    mail = task_file(tmp_path, "Do it quietly.\n", f"task-{name}.md")
    r = d.bench("spawn", "--json", "--stall-after", stall, "--name", name, "--mail", mail,
                "--subject", "quiet work", "--reply-to", parent, "--",
                "bash", "-c", script)  # fmt: skip
    assert r.rc == 0, r
    return r.json


def stall_mails(d, parent: str = "parent") -> list[dict]:
    return [x for x in mailbox(d, parent) if "(stalled: idle" in x["meta"]["subject"]]


def test_a_stalled_child_mails_its_parent_once_per_stall(shared, who, tmp_path):
    """A stand-in that prints only when given a line (its wake, then `bench type`)."""
    d, quiet, parent = shared, who + "q", who + "p"
    # A line with a bidi override: nothing of it may reach the mail as it is.
    script = (
        "stty -echo; printf 'step 1\\nstep 2 \\342\\200\\256evil\\n'; "
        "while IFS= read -r line; do printf 'got: %s\\n' \"$line\"; done"
    )
    a = stall_job(d, tmp_path, script, quiet, parent=parent)
    woken = d.wait_event("agent/woken", lambda e: e["handle"] == quiet, 30)
    first = d.wait_event("job/stalled", lambda e: e["session"] == a["session"], 30, woken["seq"])
    assert first["mailed"] == [parent] and first["refused"] == []
    assert first["idle_ms"] >= 1000
    mail = stall_mails(d, parent)[-1]
    assert mail["meta"]["from"] == quiet
    assert mail["meta"]["in-reply-to"] == a["mail_id"]
    assert mail["meta"]["subject"].startswith("Re: quiet work (stalled: idle ")
    body = mail["body"]
    assert f"{quiet} (session " in body and "has shown no output for" in body
    assert "    step 1\n" in body and "    got: You have mail" in body
    # The screen model shows the override as U+FFFD; nothing of it reaches the mail.
    assert "evil" in body and "\u202e" not in body
    row = ps_row(d, a["session"])
    assert row["stalled"] is True
    line = next(x for x in d.bench("ps").out.splitlines() if x.startswith(f"{quiet} "))
    assert " stalled " in line, line
    # Activity ends the stall; no second mail meanwhile.
    since = d.last_seq()
    d.ok("type", quiet, "hello")
    active = d.wait_event("job/active", lambda e: e["session"] == a["session"], 30, since)
    assert active["stalled_ms"] >= 0
    # A new stall mails again, with the new screen.
    second = d.wait_event("job/stalled", lambda e: e["session"] == a["session"], 30, since)
    assert second["seq"] > active["seq"] and second["mailed"] == [parent]
    d.wait_until(lambda: "got: hello" in stall_mails(d, parent)[-1]["body"], 30, "the second mail")
    d.ok("kill", quiet)
    settled(d, quiet)
    # Once per stall: stalls and activity alternate, and each stall sent exactly one mail.
    kinds = [
        e["kind"]
        for e in d.events()
        if e["kind"] in ("job/stalled", "job/active") and e.get("session") == a["session"]
    ]
    assert kinds[0] == "job/stalled" and kinds[-1] == "job/stalled", kinds
    assert all(x != y for x, y in zip(kinds, kinds[1:], strict=False)), kinds
    assert len(stall_mails(d, parent)) == kinds.count("job/stalled")


def test_a_child_that_reported_or_prints_does_not_stall(shared, who, tmp_path):
    d, parent = shared, who + "p"
    done, never, barrier = who + "d", who + "n", who + "b"
    reported = stall_job(
        d, tmp_path, "bench report 'all I have'; exec sleep 600", done, parent=parent
    )
    d.wait_event("job/reported", lambda e: e["session"] == reported["session"])
    stall_job(d, tmp_path, "exec sleep 600", never, stall="0s", parent=parent)
    # A third job stalls; the barrier: by then the others had as long to stall.
    last = stall_job(d, tmp_path, "exec sleep 600", barrier, stall="2s", parent=parent)
    d.wait_event("job/stalled", lambda e: e["session"] == last["session"], 30)
    ours = {done, never, barrier}
    stalled = {e["handle"] for e in d.events(kind="job/stalled") if e["handle"] in ours}
    assert stalled == {barrier}, stalled
    for h in (done, never, barrier):
        d.ok("kill", h)


def test_stall_after_needs_a_job_and_a_good_duration(shared, tmp_path):
    d = shared
    before = {s["session"] for s in d.ok("ps", "-a")["sessions"]}
    r = d.bench("spawn", "--stall-after", "1s", "--", "true")
    assert r.rc == 2 and "--stall-after" in r.err
    mail = task_file(tmp_path)
    for value in ("30d", "0.5s"):  # past --max-deadline; below the 1 s floor
        r = d.bench("spawn", "--json", "--stall-after", value, "--mail", mail, "--", "true")
        assert_refused(r, "bad-duration")
    # Nothing started (the module's other tests may have left sessions of their own).
    assert [s for s in d.ok("ps", "-a")["sessions"] if s["session"] not in before] == []


def test_stall_mails_are_sends_the_childs_limits_apply(make_daemon, tmp_path):
    """A spawner that makes its child stall again and again (a hostile tree turning
    stalls into a stream of mail) meets the child's send bucket: past it, the stall is
    still recorded, the mail refused and named in the event."""
    d = make_daemon("--send-burst", "1", "--send-rate", "0.001")
    script = "stty -echo; while IFS= read -r line; do printf 'got: %s\\n' \"$line\"; done"
    a = stall_job(d, tmp_path, script)
    first = d.wait_event("job/stalled", lambda e: e["session"] == a["session"], 30)
    assert first["mailed"] == ["parent"]
    since = d.last_seq()
    d.ok("type", "quiet", "again")
    d.wait_event("job/active", lambda e: e["session"] == a["session"], 30, since)
    second = d.wait_event("job/stalled", lambda e: e["session"] == a["session"], 30, since)
    assert second["mailed"] == [] and second["refused"] == ["parent"]
    hit = d.wait_event("limit/hit", lambda e: e["sender"] == "quiet", 30)
    assert hit["code"] == "rate-limited"
    assert len(stall_mails(d)) == 1
    d.ok("kill", "quiet")
