"""Jobs stored on disk, met at start-up: an earlier version's outbox is moved into the
job records and its jobs keep their promises; a record that does not load is left and
said, and the others settle as before.

Anything running as the user can write BENCH_DIR. A job record that is not a job
(garbage written by hand or by a hostile agent while the daemon was down) must not keep
the daemon from starting, nor the jobs beside it from their replies.
"""

import os
import shutil

from tests.conformance.test_jobs import job, kill_leftover, mailbox, posted_to, settled

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "outbox_f84c24b")
GARBAGE = (
    '{"job": {"session": 5}}',
    "not json at all",
    '{"job": {"session": "s-other", "handle": "h", "key": "k", "sender": "o", "reply_to": []}}',
)


def test_a_stored_job_that_does_not_load_is_left_and_the_rest_settle(make_daemon, tmp_path):
    d = make_daemon("--retry-base", "0.05")
    a = job(d, tmp_path, "child", "exec sleep 30", reply_to=("parent",), key="kept")
    try:
        d.kill9()
        for i, text in enumerate(GARBAGE):
            with open(os.path.join(d.dir, "jobs", "open", f"s-hostile{i}.json"), "w") as f:
                f.write(text)
        d.start()
        st = settled(d, "child")
        assert st["outcome"] == "interrupted" and st["recovered"] is True
        posted_to(d, "parent")
        (msg,) = mailbox(d, "parent")
        assert msg["meta"]["key"] == "outbox:kept:reply:0"
        # The garbage records: said in the log, left where they are, never settled.
        with open(os.path.join(d.dir, "benchd.log"), encoding="utf-8") as f:
            log = f.read()
        for i in range(len(GARBAGE)):
            assert f"s-hostile{i}" in log
            assert os.path.exists(os.path.join(d.dir, "jobs", "open", f"s-hostile{i}.json"))
        assert log.count("a stored job does not load") == len(GARBAGE)
        assert {e["handle"] for e in d.events(kind="job/settled")} == {"child"}
        assert d.ok("status")  # the daemon answers
    finally:
        kill_leftover(a["pid"])


def test_an_outbox_written_by_f84c24b_keeps_its_jobs(make_daemon):
    """A state dir whose outbox.sqlite f84c24b wrote (tests/fixtures/outbox_f84c24b): its
    running jobs settle (interrupted: their sessions died with that daemon; one by its
    deadline), the reply it still owed is delivered, and what it delivered is not
    delivered again."""
    d = make_daemon("--retry-base", "0.05", start=False)
    os.makedirs(d.dir, mode=0o700, exist_ok=True)
    shutil.copy(os.path.join(FIXTURE, "outbox.sqlite"), os.path.join(d.dir, "outbox.sqlite"))
    os.chmod(os.path.join(d.dir, "outbox.sqlite"), 0o600)
    d.start()
    run, past = settled(d, "child"), settled(d, "late")
    assert (run["outcome"], run["reason"], run["recovered"]) == (
        "interrupted",
        "daemon-stopped",
        True,
    )
    assert (past["outcome"], past["reason"]) == ("interrupted", "deadline")
    (deadline,) = d.events(kind="job/deadline")
    assert deadline["handle"] == "late" and deadline["recovered"] is True
    posted_to(d, "ghost")
    d.wait_until(lambda: len(mailbox(d, "parent")) == 2, 30, "two replies to parent")
    replies = {m["meta"]["key"]: m for m in mailbox(d, "parent")}
    assert sorted(replies) == ["outbox:task-past:reply:0", "outbox:task-run:reply:0"]
    run_reply = replies["outbox:task-run:reply:0"]
    assert run_reply["meta"]["subject"] == "Re: subject of task-run (interrupted)"
    assert run_reply["body"].endswith("\n\nhalfway there")  # the report it had made
    (owed,) = mailbox(d, "ghost")
    assert owed["meta"]["key"] == "outbox:task-owed:reply:1"
    assert owed["body"].endswith("\n\nreport of s-owed")
    # Settled jobs settle no more; the delivered reply was not sent again.
    assert {e["handle"] for e in d.events(kind="job/settled")} == {"child", "late"}
    assert sorted(e["key"] for e in d.events(kind="outbox/posted")) == [
        "outbox:task-owed:reply:1",
        "outbox:task-past:reply:0",
        "outbox:task-run:reply:0",
    ]
    assert os.path.exists(os.path.join(d.dir, "outbox.sqlite.migrated"))
    assert not os.path.exists(os.path.join(d.dir, "outbox.sqlite"))
    with open(os.path.join(d.dir, "benchd.log"), encoding="utf-8") as f:
        assert "s-bad" in f.read()  # the row that is not a job: said
