"""Jobs (benchd.core.jobs, pure) and the job host on the mailroom's own parts (benchd.
runtime.jobhost): a real event log, journal, index and mailroom in a temporary state
dir, so a settlement, its replies and their receipts are seen in the journal itself."""

import os

import msgspec
import pytest
import trio
import trio.lowlevel
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core import jobs
from benchd.core.authority import Caller
from benchd.core.jobs import Job, JobRecord, Outcome, Reply, reply_body, reply_key, reply_outcome
from benchd.core.names import IdClock
from benchd.runtime.committer import Batch, Committer, JournalStore
from benchd.runtime.jobhost import Ending, JobHost
from benchd.runtime.mailroom import Mailboxes, Mailroom
from benchd.runtime.roster import Session
from benchd.store.eventlog import EventLog
from benchd.store.index import Index
from benchd.store.journal import SEGMENTS, Journal, Rename, Write, decode_entries, read_segment
from benchd.store.outbox import JobFiles
from benchd.store.replay import replay
from tests.support.clock import TestClock


def header(body: str) -> dict:
    return yaml.safe_load(body.split("---\n")[1])


JOB = Job(session="s-1", handle="child", key="task-1", sender="operator", reply_to=("p0", "p1"))


# --------------------------------------------------------------------------- outcomes, bodies


@pytest.mark.parametrize(
    "outcome, said",
    [
        (Outcome.COMPLETED, "completed"),
        (Outcome.FAILED, "failed"),
        (Outcome.INTERRUPTED, "interrupted"),
        (Outcome.CANCELLED, None),
        (Outcome.ABANDONED, None),
    ],
)
def test_reply_outcome_says_the_jobs_own_word(outcome, said):
    assert reply_outcome(outcome) == said


def test_reply_body_exact_text_with_details():
    body = reply_body(
        Outcome.COMPLETED, "child", "s-1", "Fixed it.", {"ended": "exited", "exitCode": 0}
    )
    assert body == (
        "---\noutcome: completed\nagentId: child\nsessionId: s-1\nended: exited\n"
        "exitCode: 0\n---\n\nFixed it."
    )
    with pytest.raises(WireError) as exc:
        reply_body(Outcome.FAILED, "child", "s-1", "x", {"outcome": "completed"})
    assert exc.value.code == "bad-content"


@pytest.mark.parametrize(
    "value", ["a\noutcome: completed", "x: y", "123", "null", "yes", "~", "-dash", "tab\there"]
)
def test_reply_body_header_cannot_be_forged_or_mistyped(value):
    body = reply_body("interrupted", value, value, "c")
    assert body.count("\n") == 6  # still exactly three header lines
    assert header(body) == {"outcome": "interrupted", "agentId": value, "sessionId": value}


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
@settings(max_examples=50, deadline=None)
def test_reply_body_header_round_trips_any_ids(agent_id, session_id):
    try:
        (agent_id + session_id).encode("utf-8")
    except UnicodeEncodeError:
        return  # ids come from UTF-8 wires
    body = reply_body("completed", agent_id, session_id, "body")
    assert header(body) == {"outcome": "completed", "agentId": agent_id, "sessionId": session_id}


def test_reply_keys_and_subject():
    assert reply_key("task-1", 0) == "outbox:task-1:reply:0"
    assert reply_key("a:reply:1", 12) == "outbox:a:reply:1:reply:12"
    assert jobs.reply_subject("fix it", "task-1", "completed") == "Re: fix it (completed)"
    assert jobs.reply_subject(None, "task-1", "failed") == "Re: task-1 (failed)"
    long = jobs.reply_subject("x" * 300, "k", "interrupted")
    assert len(long) == 200 and long.endswith(" (interrupted)")


# --------------------------------------------------------------------------- records


def test_settle_owes_one_reply_per_distinct_address_keys_keeping_their_index():
    job = msgspec.structs.replace(JOB, reply_to=("bob", "carol", "bob", "dave@n2"))
    record = jobs.settle(JobRecord(job=job), Outcome.COMPLETED, "done", {"ended": "exited"}, 7)
    assert [(r.index, r.to, r.due) for r in record.replies] == [
        (0, "bob", 7),
        (1, "carol", 7),
        (3, "dave@n2", 7),
    ]
    assert [record.reply_key(r) for r in record.replies][-1] == "outbox:task-1:reply:3"
    assert record.outcome == "completed" and record.owing and not record.running
    assert header(record.body)["ended"] == "exited" and record.body.endswith("\n\ndone")


@pytest.mark.parametrize("outcome", [Outcome.CANCELLED, Outcome.ABANDONED])
def test_a_quiet_outcome_owes_nothing(outcome):
    record = jobs.settle(JobRecord(job=JOB), outcome, "x", {}, 7)
    assert record.replies == () and record.outcome == str(outcome) and not record.owing


def test_attempted_delivers_or_backs_off():
    record = jobs.settle(JobRecord(job=JOB), Outcome.FAILED, "x", {}, 1000)
    after = jobs.attempted(record, {0: True, 1: False}, 1000, 100)
    assert after.replies == (
        Reply(index=0, to="p0", due=1000, delivered=True),
        Reply(index=1, to="p1", attempts=1, due=1100),
    )
    assert jobs.due(after, 1099) == [] and [r.index for r in jobs.due(after, 1100)] == [1]
    done = jobs.attempted(after, {0: False, 1: True}, 2000, 100)  # a receipt stays one
    assert all(r.delivered for r in done.replies) and not done.owing


def test_backoff_doubles_and_caps():
    assert [jobs.backoff_ms(a, 1000, 5000) for a in range(6)] == [1000, 2000, 4000] + [5000] * 3
    assert jobs.backoff_ms(10_000, 1000) == 300_000


# --------------------------------------------------------------------------- the host


class _Log:
    def __init__(self) -> None:
        self.said: list[str] = []

    def error(self, event: str, **kw: object) -> None:
        self.said.append(event)

    warning = info = exception = error


class Rig:
    """The daemon's own parts for jobs, in `state`: what the start-up opens and wires."""

    def __init__(self, state: str, clock: TestClock, refuse: set[str] | None = None) -> None:
        self.state, self.clock, self.refuse = state, clock, refuse or set()
        self.events: list[m.Event] = []
        self.eventlog = EventLog(os.path.join(state, "events.jsonl"))
        self.journal = Journal(state, lambda: self.eventlog.fd, preallocate=False)
        self.journal.open()
        self.index = Index(os.path.join(state, "index.sqlite"))
        self.committer = Committer(
            JournalStore(self.eventlog, self.journal, clock),
            self.index,
            lambda records, events: self.events.extend(events),
        )
        root = os.path.join(state, "mail")
        self.mailroom = Mailroom(
            root, self.index, self.committer, Mailboxes(root), IdClock(), self._admit, clock
        )
        self.files = JobFiles(state)
        self.log = _Log()
        self.host = JobHost(
            self.files,
            self.mailroom,
            self.committer,
            self.index,
            65536,
            0.1,
            self.log,
            clock,  # fmt: skip
        )

    def _admit(self, sender: str, to: str, size: int, batch: Batch) -> None:
        if to in self.refuse:
            raise WireError("mailbox-full", f"{to}'s mailbox is full")

    async def close(self) -> None:
        """A clean stop: everything committed, the index too, the journal checkpointed."""
        await self.committer.drain()
        self.journal.close()
        self.index.close()
        self.eventlog.close()

    def kinds(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def journal_records(self) -> list[list]:
        out = []
        for name in SEGMENTS:
            with open(os.path.join(self.state, name), "rb") as f:
                records, _bad = read_segment(f.read())
            out += [(r.seq, decode_entries(r.payload, self.state)) for r in records]
        return [entries for _seq, entries in sorted(out, key=lambda x: x[0])]


def run(state, scenario, refuse=None, *, crash: bool = False) -> Rig:
    """Start the rig's committer and job host in `state`, run `scenario`, stop cleanly
    (`crash`: stop as a kill -9 would, the journal not checkpointed)."""

    async def main() -> Rig:
        rig = Rig(str(state), TestClock(wall_ms=1_000_000), refuse)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(rig.committer.run)
                await nursery.start(rig.host.run)
                await scenario(rig)
                nursery.cancel_scope.cancel()
        finally:
            if crash:
                for seg in rig.journal.segments:
                    os.close(seg.fd)
                rig.index.close()
                rig.eventlog.close()
            else:
                await rig.close()
        return rig

    return trio.run(main)


async def idle(rig: Rig) -> None:
    """A scenario that only starts and stops (what the start does is the test)."""


async def settled_all(rig: Rig, session: str) -> None:
    """Wait (with a deadline) until the job of `session` owes nothing."""
    with trio.fail_after(10):
        while rig.host.job(session).owing:  # noqa: ASYNC110 - the record has no event
            await trio.sleep(0.01)


async def spawn(rig: Rig, sid: str, handle: str, reply_to: list[str], key: str) -> Session:
    child = Session(sid, handle, f"token-{sid}", ["agent"])
    spec = m.JobMailSpec(body="do it", reply_to=reply_to, key=key, subject="count")
    caller = Caller("operator", None)
    rig.host.begin(child, spec, caller)
    await rig.host.deliver_task(child, spec, caller)
    child.exited_with(0, None)  # each job here ends completed unless a test says
    return child


def test_a_settlement_and_its_replies_are_one_journal_record(tmp_path):
    async def scenario(rig):
        child = await spawn(rig, "s-1", "child", ["p0", "p1"], "task-1")
        assert rig.host.job("s-1").running and rig.host.job("s-1").task_id
        await rig.host.settle(child)
        assert child.outcome == "completed"
        records.extend(rig.journal_records())  # before the clean stop drops them

    records: list = []
    rig = run(tmp_path, scenario)
    opened, done = (str(tmp_path / "jobs" / sub / "s-1.json") for sub in ("open", "done"))
    (settled,) = [r for r in records if Rename(opened, done) in r]
    written = [e.path for e in settled if isinstance(e, Write)]
    assert sum("/mail/p0/inbox/" in p for p in written) == 1
    assert sum("/mail/p1/inbox/" in p for p in written) == 1
    assert [e.key for e in rig.kinds(m.OutboxPosted)] == [
        "outbox:task-1:reply:0",
        "outbox:task-1:reply:1",
    ]
    (ev,) = rig.kinds(m.JobSettled)
    assert (ev.outcome, ev.replies, ev.recovered) == ("completed", 2, False)
    record = JobFiles(str(tmp_path)).job("s-1")
    assert record is not None and not record.owing and record.subject == "count"
    assert not os.path.exists(tmp_path / "jobs" / "open" / "s-1.json")


def test_a_refused_reply_stays_owed_and_is_retried_by_the_drain(tmp_path):
    async def scenario(rig):
        child = await spawn(rig, "s-1", "child", ["p0", "full"], "task-1")
        await rig.host.settle(child)
        record = rig.host.job("s-1")
        assert [r.delivered for r in record.replies] == [True, False]
        assert record.replies[1].attempts == 1 and record.replies[1].due == 1_000_100
        (retry,) = rig.kinds(m.OutboxRetry)
        assert (retry.key, retry.code) == ("outbox:task-1:reply:1", "mailbox-full")
        rig.refuse.clear()
        rig.clock.advance(0.1)  # the retry is due (the drain's timer reads the wall clock)
        await settled_all(rig, "s-1")

    rig = run(tmp_path, scenario, refuse={"full"})
    assert not os.path.exists(tmp_path / "jobs" / "open" / "s-1.json")
    assert [e.to for e in rig.kinds(m.OutboxPosted)] == ["p0", "full"]


def test_a_record_written_again_from_an_older_state_posts_nothing_twice(tmp_path):
    """As after a crash in a start that moved an outbox part way: the record says a
    reply is owed that the mailbox already holds. Its key makes it a duplicate."""
    holder: dict = {}

    async def first(rig):
        child = await spawn(rig, "s-1", "child", ["p0"], "task-1")
        await rig.host.settle(child)
        holder["record"] = rig.host.job("s-1")

    run(tmp_path, first)
    record = holder["record"]
    (reply,) = record.replies
    older = msgspec.structs.replace(
        record, replies=(msgspec.structs.replace(reply, delivered=False),)
    )
    os.unlink(tmp_path / "jobs" / "done" / "s-1.json")
    with open(tmp_path / "jobs" / "open" / "s-1.json", "wb") as f:
        f.write(msgspec.json.encode(older))

    rig = run(tmp_path, lambda rig: settled_all(rig, "s-1"))
    (posted,) = rig.kinds(m.OutboxPosted)
    assert rig.kinds(m.MailSent) == []  # nothing new was written
    assert len(os.listdir(tmp_path / "mail" / "p0" / "inbox")) == 1
    assert posted.key == "outbox:task-1:reply:0"


def test_a_report_and_a_settlement_in_one_batch_both_count(tmp_path):
    async def scenario(rig):
        child = await spawn(rig, "s-1", "child", ["p0"], "task-1")
        ending = Ending("exited", exit_code=0)
        ops = [
            rig.host.report_op(child, "the answer: 42", 14),
            rig.host.settle_op(child.job, Outcome.COMPLETED, "", ending, False),
        ]
        for op in ops:
            rig.committer.enqueue(op)  # no await between: one batch
        reported, settled = [await op.wait() for op in ops]
        assert reported.content == "the answer: 42" and reported.running
        assert settled.body.endswith("\n\nthe answer: 42") and not settled.owing
        assert rig.host.job("s-1") == settled

    rig = run(tmp_path, scenario)
    assert [type(e) for e in rig.events[-4:]] == [
        m.JobReported,
        m.JobSettled,
        m.MailSent,
        m.OutboxPosted,
    ]


def test_a_settled_job_never_settles_again_and_a_report_after_is_refused(tmp_path):
    async def scenario(rig):
        child = await spawn(rig, "s-1", "child", ["p0"], "task-1")
        await rig.host.settle(child)
        child.exit = 3
        await rig.host.settle(child)
        assert rig.host.job("s-1").outcome == "completed"
        with pytest.raises(WireError) as exc:
            await rig.host.report(Caller("child", child), "late")  # type: ignore[arg-type]
        assert exc.value.code == "no-job"

    rig = run(tmp_path, scenario)
    assert len(rig.kinds(m.OutboxPosted)) == 1


def test_a_job_left_running_settles_at_start_as_daemon_stopped(tmp_path):
    async def first(rig):
        await spawn(rig, "s-1", "child", ["p0"], "task-1")

    run(tmp_path, first)
    rig = run(tmp_path, idle)
    (ev,) = rig.kinds(m.JobSettled)
    assert (ev.outcome, ev.reason, ev.recovered) == ("interrupted", "daemon-stopped", True)
    body = JobFiles(str(tmp_path)).job("s-1").body
    assert header(body)["ended"] == "daemon-stopped"
    assert Ending("daemon-stopped", reason="daemon-stopped").fields()["reason"] == "daemon-stopped"


def test_a_record_that_does_not_load_is_left_and_said(tmp_path):
    os.makedirs(tmp_path / "jobs" / "open")
    (tmp_path / "jobs" / "open" / "s-bad.json").write_text('{"job": 5}')
    rig = run(tmp_path, idle)
    assert rig.log.said == ["a stored job does not load"]
    assert (tmp_path / "jobs" / "open" / "s-bad.json").exists()


def test_a_settlement_lost_with_the_page_cache_comes_back_whole_from_the_journal(tmp_path):
    """A kill -9 keeps the page cache; a power cut does not. Undo every file the
    settlement's commit wrote (its record, its replies): the journal's replay puts all
    of them back, as one."""

    async def scenario(rig):
        child = await spawn(rig, "s-1", "child", ["p0", "p1"], "task-1")
        await rig.host.settle(child)

    run(tmp_path, scenario, crash=True)
    done = tmp_path / "jobs" / "done" / "s-1.json"
    want = {p: p.read_bytes() for p in [done, *(tmp_path / "mail").glob("p*/inbox/*.md")]}
    assert len(want) == 3
    for path in want:
        path.unlink()
    replay(str(tmp_path), str(tmp_path / "events.jsonl"))
    assert {p: p.read_bytes() for p in want} == want
    assert not (tmp_path / "jobs" / "open" / "s-1.json").exists()
    record = JobFiles(str(tmp_path)).job("s-1")
    assert record is not None and not record.owing and record.outcome == "completed"


def test_what_is_not_a_record_file_never_blocks_or_stops_a_start(tmp_path):
    """A FIFO, a directory or a link where a record goes (anyone running as the user can
    make one): said and left; a FIFO is never opened for a blocking read."""
    opened, staging = tmp_path / "jobs" / "open", tmp_path / "jobs" / "tmp"
    os.makedirs(opened)
    os.makedirs(staging / "a-dir")
    os.mkfifo(opened / "s-fifo.json")
    os.mkdir(opened / "s-dir.json")
    os.symlink("/etc/passwd", opened / "s-link.json")
    files = JobFiles(str(tmp_path))
    assert sorted(where for where, _why in files.bad) == [
        "s-dir.json",
        "s-fifo.json",
        "s-link.json",
    ]
    assert files.open == {} and (staging / "a-dir").is_dir()
