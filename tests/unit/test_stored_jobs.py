"""Jobs stored by the daemon before payloads were typed still load, and behave the same.

The records below were copied byte for byte from a real outbox (outbox.sqlite) that the
previous version wrote: a job spawned with `bench spawn --mail ... --reply-to parent
--reply-to ghost --key task-1 --subject 'Count the lines'`, whose reply to `ghost` was
refused (its mailbox a link) and waits in the outbox as a pending row. Nothing here
builds them from the current code: they are the on-disk format as it was.
"""

import json

import trio

from benchd.core.jobs import (
    Address,
    AgentPayload,
    FanOut,
    Job,
    JobMail,
    Outcome,
    decode_agent_job,
)
from benchd.store.outbox import SqliteOutbox

SESSION = "s6fac01ea"
STORED_JOB = (
    '{"queue": "s6fac01ea", "payload": {"sessionId": "s6fac01ea", "mail": {"key": "task-1", '
    '"to": {"kind": "agent", "agentId": "child", "sessionId": "s6fac01ea"}, "from": '
    '{"kind": "agent", "agentId": "operator", "sessionId": "operator"}, "replyTo": '
    '[{"kind": "agent", "agentId": "parent", "sessionId": "parent"}, {"kind": "agent", '
    '"agentId": "ghost", "sessionId": "ghost"}], "content": "Please do it.\\n", '
    '"createdAt": 1796199050565}}}'
)
STORED_PENDING = (
    '{"mail":{"key":"outbox:task-1:reply:1","to":{"kind":"agent","agentId":"ghost",'
    '"sessionId":"ghost"},"from":{"kind":"agent","agentId":"child","sessionId":"s6fac01ea"},'
    '"replyTo":[],"content":"---\\noutcome: completed\\nagentId: child\\nsessionId: '
    's6fac01ea\\nended: exited\\nexitCode: 0\\n---\\n\\nall done: 42","createdAt":'
    '1796199050635,"outcome":"completed"},"attempts":1,"due":1796199051640}'
)
REPLIED_AT = 1796199050635
TASK = JobMail(
    key="task-1",
    to=Address("child", SESSION),
    from_=Address("operator", "operator"),
    reply_to=(Address("parent", "parent"), Address("ghost", "ghost")),
    content="Please do it.\n",
    created_at=1796199050565,
)


def stored_outbox(tmp_path) -> SqliteOutbox:
    """A real outbox file holding the job as the previous version wrote it (running)."""
    outbox = SqliteOutbox(str(tmp_path / "outbox.sqlite"))
    with outbox:
        outbox.db.execute(
            "INSERT INTO jobs(session, handle, job, task_id, subject) VALUES (?, ?, ?, ?, ?)",
            (SESSION, "child", STORED_JOB, "20261202T081050.566Z-0001", "Count the lines"),
        )
    return outbox


def test_a_stored_job_decodes_once_to_its_struct(tmp_path):
    outbox = stored_outbox(tmp_path)
    (row,) = outbox.running_jobs()
    job = Job.from_json(row.job)
    assert job == Job(SESSION, AgentPayload(SESSION, TASK))
    assert decode_agent_job(job) is job.payload  # decoded when loaded, not again
    # Written back, it is the same bytes: the on-disk format did not change.
    assert json.dumps(job.to_json()) == STORED_JOB
    # The outbox's SQL reads the task's key out of the stored JSON, as before.
    assert outbox.task_of("task-1") == ("20261202T081050.566Z-0001", "Count the lines")
    outbox.close()


class Posted:
    def __init__(self) -> None:
        self.mails: list[JobMail] = []

    async def __call__(self, mail: JobMail) -> bool:
        self.mails.append(mail)
        return True


def test_a_stored_job_settles_to_the_replies_it_wrote_before(tmp_path):
    """Settled again now, the stored job owes the same replies, in the same bytes as the
    pending row the previous version wrote (but for its attempts and due time)."""
    outbox = stored_outbox(tmp_path)
    (row,) = outbox.running_jobs()
    wakes: list[int] = []
    fan = FanOut(outbox, Posted(), wakes.append, lambda: REPLIED_AT)
    details = {"ended": "exited", "exitCode": 0}
    with outbox:
        assert fan.fan_out(Job.from_json(row.job), Outcome.COMPLETED, "all done: 42", details) == 2
    new = outbox.read("outbox:task-1:reply:1")
    assert new is not None
    mail_part = STORED_PENDING.split(',"attempts"')[0]
    assert new.startswith(mail_part + ',"attempts":0')
    parent = json.loads(outbox.read("outbox:task-1:reply:0") or "")
    assert parent["mail"]["to"] == {"kind": "agent", "agentId": "parent", "sessionId": "parent"}
    assert wakes == [REPLIED_AT]
    outbox.close()


def test_a_stored_pending_reply_is_posted_as_it_was_written(tmp_path):
    outbox = SqliteOutbox(str(tmp_path / "outbox.sqlite"))
    with outbox:
        outbox.put("outbox:task-1:reply:1", STORED_PENDING)
    post = Posted()
    fan = FanOut(outbox, post, lambda at: None, lambda: 1796199051640)
    report = trio.run(fan.drain_outbox)
    assert report.posted == 1
    (mail,) = post.mails
    assert mail == JobMail.from_json(json.loads(STORED_PENDING)["mail"])
    assert mail.to == Address("ghost", "ghost") and mail.outcome == "completed"
    assert mail.reply_to == () and mail.created_at == REPLIED_AT
    assert json.loads(outbox.read("outbox:task-1:reply:1") or "") == {
        "receipt": 1,
        "at": 1796199051640,
    }
    outbox.close()
