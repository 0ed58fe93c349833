"""A job's stored record, met at start-up: one that does not load is left and said, and
the others settle as before.

Anything running as the user can write outbox.sqlite. A job row that is not a job
(its payload garbage, written by hand or by a hostile agent while the daemon was down)
must not keep the daemon from starting, nor the jobs beside it from their replies.
"""

import os
import sqlite3

from tests.conformance.test_jobs import job, kill_leftover, mailbox, posted_to, settled

GARBAGE = (
    '{"queue": "s-hostile", "payload": {"sessionId": 5}}',
    '{"queue": "s-hostile2", "payload": "not an object"}',
    '{"queue": "s-hostile3", "payload": {"sessionId": "s-other", "mail": null}}',
)


def test_a_stored_job_that_does_not_load_is_left_and_the_rest_settle(make_daemon, tmp_path):
    d = make_daemon("--retry-base", "0.05")
    a = job(d, tmp_path, "child", "exec sleep 30", reply_to=("parent",), key="kept")
    try:
        d.kill9()
        db = sqlite3.connect(os.path.join(d.dir, "outbox.sqlite"))
        with db:
            for i, text in enumerate(GARBAGE):
                db.execute(
                    "INSERT INTO jobs(session, handle, job) VALUES (?, ?, ?)",
                    (f"s-hostile{i}", f"mallory{i}", text),
                )
        db.close()
        d.start()
        st = settled(d, "child")
        assert st["outcome"] == "interrupted" and st["recovered"] is True
        posted_to(d, "parent")
        (msg,) = mailbox(d, "parent")
        assert msg["meta"]["key"] == "outbox:kept:reply:0"
        # The garbage rows: said in the log, left in the outbox, never settled.
        with open(os.path.join(d.dir, "benchd.log"), encoding="utf-8") as f:
            log = f.read()
        for i in range(len(GARBAGE)):
            assert f"s-hostile{i}" in log
        assert log.count("a stored job does not load") == len(GARBAGE)
        settled_handles = {e["handle"] for e in d.events(kind="job/settled")}
        assert not any(h.startswith("mallory") for h in settled_handles)
        assert d.ok("status")  # the daemon answers
    finally:
        kill_leftover(a["pid"])
