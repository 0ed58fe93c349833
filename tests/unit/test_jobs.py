"""Unit tests for benchd.core.jobs: agent jobs and the reply fan-out core, on in-memory ports."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import trio
import trio.testing
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.core.jobs import (
    MAX_ID_LEN,
    MAX_KEY_LEN,
    Address,
    AgentPayload,
    AgentWork,
    DrainReport,
    FanOut,
    Job,
    JobError,
    JobMail,
    Outcome,
    _parse_row,
    _Pending,
    agent_job,
    decode_agent_job,
    reply_body,
    reply_key,
    reply_outcome,
)

# --------------------------------------------------------------------------- fakes


class FakeOutbox:
    """A dict of rows; ``list`` is ordered by key and strictly after ``after_key``."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.list_calls: list[tuple[int, str | None]] = []

    def put(self, key: str, value: str) -> None:
        assert isinstance(key, str) and isinstance(value, str)
        self.rows[key] = value

    def read(self, key: str) -> str | None:
        return self.rows.get(key)

    def list(self, limit: int, after_key: str | None) -> list[tuple[str, str]]:
        self.list_calls.append((limit, after_key))
        keys = sorted(k for k in self.rows if after_key is None or k > after_key)
        return [(k, self.rows[k]) for k in keys[:limit]]


def pending(rig) -> int:
    """How many replies the outbox still owes: the rows the core reads as pending."""
    return sum(isinstance(_parse_row(v), _Pending) for v in rig.outbox.rows.values())


class FakeClock:
    def __init__(self, t: int = 1_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t

    def advance(self, ms: int) -> None:
        self.t += ms


class FakePost:
    """Records every call; refuses or raises for chosen recipients (by agentId)."""

    def __init__(self) -> None:
        self.calls: list[JobMail] = []
        self.accepted: list[JobMail] = []
        self.refuse: set[str] = set()
        self.raise_for: set[str] = set()
        self.exc: type[Exception] = RuntimeError
        self.decide = None  # optional callable(mail) -> bool, may raise

    async def __call__(self, mail: JobMail) -> bool:
        self.calls.append(mail)
        if mail.to.agent_id in self.raise_for:
            raise self.exc(f"mailbox of {mail.to.agent_id} is on fire")
        if mail.to.agent_id in self.refuse:
            return False
        if self.decide is not None and not self.decide(mail):
            return False
        self.accepted.append(mail)
        return True


class Wakes(list):
    """schedule_wake recorder: the list of ``at_ms`` values, in call order."""

    def __call__(self, at_ms: int) -> None:
        assert isinstance(at_ms, int)
        self.append(at_ms)


class Rig:
    def __init__(self, **kwargs) -> None:
        self.outbox = FakeOutbox()
        self.post = FakePost()
        self.clock = FakeClock()
        self.wakes = Wakes()
        self.fan = FanOut(self.outbox, self.post, self.wakes, self.clock, **kwargs)
        self.consumed = 0  # wakes[:consumed] were taken by a timer firing

    def row(self, key: str) -> dict:
        return json.loads(self.outbox.rows[key])

    async def drain_pass(self, limit: int = 10_000) -> list[DrainReport]:
        """Drain until a call reports no more rows (one full pass from the cursor)."""
        reports = []
        for _ in range(limit):
            reports.append(await self.fan.drain_outbox())
            if not reports[-1].more:
                return reports
        raise AssertionError("the pass did not end")

    async def fire(self) -> DrainReport:
        """The host's timer fires: it consumes every wake armed so far and drains once."""
        self.consumed = len(self.wakes)
        return await self.fan.drain_outbox()

    async def run_timers(self, max_fires: int = 20_000) -> int:
        """Act as a strict host: one durable timer, re-armed to the earliest wake asked
        for since it last fired; each firing runs one drain.

        Only wakes the core scheduled drive it, and a firing forgets every earlier
        request, so a row the core forgets to wake for stays undelivered and the test
        sees it.
        """
        fires = 0
        while self.consumed < len(self.wakes):
            self.clock.t = max(self.clock.t, min(self.wakes[self.consumed :]))
            await self.fire()
            fires += 1
            assert fires < max_fires, "wakes never settle"
        return fires


def addr(agent: str = "parent", session: str = "s-parent") -> Address:
    return Address(agent_id=agent, session_id=session)


CHILD = Address("child", "s-child")


def make_mail(
    key: str = "task-1", reply_to: list[Address] | None = None, to: Address = CHILD
) -> JobMail:
    if reply_to is None:
        reply_to = [addr()]
    return JobMail(
        key=key,
        to=to,
        from_=addr("operator", "s-op"),
        reply_to=tuple(reply_to),
        content="Fix the failing test.",
        created_at=1_700_000_000_000,
    )


def make_job(key: str = "task-1", n_reply: int = 1, to: Address = CHILD) -> Job:
    recipients = [addr(f"p{i}", f"s-p{i}") for i in range(n_reply)]
    return agent_job(AgentWork(to.session_id), make_mail(key, recipients, to))


def pending_json(mail: JobMail, attempts: int, due: int) -> str:
    """A pending row in the documented format."""
    return json.dumps({"mail": mail.to_json(), "attempts": attempts, "due": due})


def header(body: str) -> dict:
    assert body.startswith("---\n")
    front, sep, _ = body[4:].partition("\n---\n\n")
    assert sep
    return yaml.safe_load(front)


# --------------------------------------------------------------------------- JobError


def test_job_error_is_a_value_error_with_code_and_message():
    err = JobError("bad-id", "agentId must be 1 to 256 characters long, not 0.")
    assert isinstance(err, ValueError)
    assert err.code == "bad-id"
    assert err.message == "agentId must be 1 to 256 characters long, not 0."
    assert "bad-id" in str(err) and err.message in str(err)


# --------------------------------------------------------------------------- Address


@pytest.mark.parametrize("n, ok", [(0, False), (1, True), (256, True), (257, False)])
@pytest.mark.parametrize("which", ["agent_id", "session_id"])
def test_address_id_lengths(n, ok, which):
    ids = {"agent_id": "a", "session_id": "s", which: "x" * n}
    if ok:
        a = Address(**ids)
        assert getattr(a, which) == "x" * n
        assert Address.from_json(a.to_json()) == a
    else:
        with pytest.raises(JobError) as exc:
            Address(**ids)
        assert exc.value.code == "bad-id"
        with pytest.raises(JobError):
            Address.from_json(
                {"kind": "agent", "agentId": ids["agent_id"], "sessionId": ids["session_id"]}
            )


def test_max_lengths_are_256():
    assert MAX_ID_LEN == 256 and MAX_KEY_LEN == 256


@pytest.mark.parametrize("bad", [None, 7, b"bytes", ["a"], 1.5])
def test_address_ids_must_be_strings(bad):
    with pytest.raises(JobError) as exc:
        Address(agent_id=bad, session_id="s")
    assert exc.value.code == "bad-id"
    with pytest.raises(JobError) as exc:
        Address(agent_id="a", session_id=bad)
    assert exc.value.code == "bad-id"


@pytest.mark.parametrize("kind", ["human", "Agent", "", None, "subagent"])
def test_address_kind_must_be_agent(kind):
    # An Address is always an agent's (its kind is no constructor argument); a stored
    # one of another kind is refused.
    with pytest.raises(JobError) as exc:
        Address.from_json({"kind": kind, "agentId": "a", "sessionId": "s"})
    assert exc.value.code == "bad-address"


@pytest.mark.parametrize(
    "data",
    [None, "agent", ["agent", "a", "s"], {}, {"agentId": "a", "sessionId": "s"}],
)
def test_address_from_json_refuses_garbage(data):
    with pytest.raises(JobError) as exc:
        Address.from_json(data)
    assert exc.value.code == "bad-address"


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "agent", "sessionId": "s"},
        {"kind": "agent", "agentId": "a"},
        {"kind": "agent", "agentId": 1, "sessionId": "s"},
    ],
)
def test_address_from_json_refuses_missing_or_bad_ids(data):
    with pytest.raises(JobError) as exc:
        Address.from_json(data)
    assert exc.value.code == "bad-id"


def test_address_json_form_is_camel_case():
    a = Address(agent_id="child", session_id="s-1")
    assert a.kind == "agent"
    assert a.to_json() == {"kind": "agent", "agentId": "child", "sessionId": "s-1"}
    assert Address.from_json({"kind": "agent", "agentId": "child", "sessionId": "s-1"}) == a
    assert hash(a) == hash(Address("child", "s-1"))


# --------------------------------------------------------------------------- JobMail


def test_mail_json_round_trip_and_keys():
    mail = make_mail(reply_to=[addr("p0", "s0"), addr("p1", "s1")])
    data = mail.to_json()
    assert data == {
        "key": "task-1",
        "to": {"kind": "agent", "agentId": "child", "sessionId": "s-child"},
        "from": {"kind": "agent", "agentId": "operator", "sessionId": "s-op"},
        "replyTo": [
            {"kind": "agent", "agentId": "p0", "sessionId": "s0"},
            {"kind": "agent", "agentId": "p1", "sessionId": "s1"},
        ],
        "content": "Fix the failing test.",
        "createdAt": 1_700_000_000_000,
    }
    assert JobMail.from_json(json.loads(json.dumps(data))) == mail


def test_mail_reply_to_is_a_tuple():
    mail = make_mail(reply_to=[addr()])
    assert mail.reply_to == (addr(),)
    hash(mail)
    with pytest.raises(JobError) as exc:  # a list would make the mail mutable
        JobMail(key="k", to=CHILD, from_=addr(), reply_to=[addr()], content="", created_at=0)  # type: ignore[arg-type]
    assert exc.value.code == "bad-mail"
    # Its JSON form is a list, read back as a tuple.
    assert JobMail.from_json(mail.to_json()).reply_to == (addr(),)


@pytest.mark.parametrize("n, ok", [(0, False), (1, True), (256, True), (257, False)])
def test_mail_key_lengths(n, ok):
    if ok:
        assert make_mail(key="k" * n).key == "k" * n
    else:
        with pytest.raises(JobError) as exc:
            make_mail(key="k" * n)
        assert exc.value.code == "bad-key"


def test_mail_key_longer_than_256_only_in_reply_form():
    long_key = "k" * 256
    reply = reply_key(long_key, 3)
    assert len(reply) > 256
    assert make_mail(key=reply).key == reply
    for bad in [
        "outbox:" + "k" * 257 + ":reply:0",  # inner key too long
        "outbox:" + "k" * 256 + ":reply:x",  # index not a number
        "outbox:" + "k" * 256 + ":reply:",  # no index
        "x" * 300,
        "box:" + "k" * 256 + ":reply:1",
    ]:
        with pytest.raises(JobError) as exc:
            make_mail(key=bad)
        assert exc.value.code == "bad-key"


@pytest.mark.parametrize("key", [None, 5, b"k"])
def test_mail_key_must_be_a_string(key):
    with pytest.raises(JobError) as exc:
        make_mail(key=key)
    assert exc.value.code == "bad-key"


@pytest.mark.parametrize(
    "field, value",
    [
        ("to", {"kind": "agent", "agentId": "a", "sessionId": "s"}),
        ("to", None),
        ("from_", "operator"),
        ("reply_to", addr()),
        ("reply_to", "parent"),
        ("reply_to", [addr(), {"kind": "agent", "agentId": "a", "sessionId": "s"}]),
        ("content", None),
        ("content", b"bytes"),
        ("created_at", True),
        ("created_at", 1.5),
        ("created_at", -1),
        ("created_at", "1700000000000"),
    ],
)
def test_mail_refuses_bad_fields(field, value):
    fields = {
        "key": "k",
        "to": CHILD,
        "from_": addr(),
        "reply_to": (),
        "content": "",
        "created_at": 0,
        field: value,
    }
    with pytest.raises(JobError) as exc:
        JobMail(**fields)
    assert exc.value.code == "bad-mail"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("to"),
        lambda d: d.pop("from"),
        lambda d: d.pop("content"),
        lambda d: d.pop("createdAt"),
        lambda d: d.pop("key"),
        lambda d: d.__setitem__("replyTo", {"kind": "agent"}),
        lambda d: d.__setitem__("replyTo", [None]),
        lambda d: d.__setitem__("to", {"kind": "user", "agentId": "a", "sessionId": "s"}),
        lambda d: d.__setitem__("createdAt", "now"),
    ],
)
def test_mail_from_json_refuses_garbage(mutate):
    data = make_mail().to_json()
    mutate(data)
    with pytest.raises(JobError):
        JobMail.from_json(data)


@pytest.mark.parametrize("data", [None, [], "mail", 3])
def test_mail_from_json_refuses_non_objects(data):
    with pytest.raises(JobError) as exc:
        JobMail.from_json(data)
    assert exc.value.code == "bad-mail"


# --------------------------------------------------------------------------- AgentWork, jobs


@pytest.mark.parametrize("n, ok", [(0, False), (1, True), (256, True), (257, False)])
def test_work_id_lengths(n, ok):
    if ok:
        assert AgentWork(session_id="x" * n).session_id == "x" * n
    else:
        with pytest.raises(JobError) as exc:
            AgentWork(session_id="x" * n)
        assert exc.value.code == "bad-work"


@pytest.mark.parametrize("bad", [None, 1, b"s"])
def test_work_ids_must_be_strings(bad):
    with pytest.raises(JobError) as exc:
        AgentWork(session_id=bad)
    assert exc.value.code == "bad-work"


def test_agent_job_shape_with_mail():
    mail = make_mail(reply_to=[addr()])
    job = agent_job(AgentWork("s-child"), mail)
    assert job.queue == "s-child"
    assert job.payload == AgentPayload("s-child", mail)
    assert job.payload.to_json() == {"sessionId": "s-child", "mail": mail.to_json()}
    assert job.to_json() == {"queue": "s-child", "payload": job.payload.to_json()}
    json.dumps(job.to_json())  # the whole job is JSON-able


def test_agent_job_without_mail():
    job = agent_job(AgentWork("s-1"))
    assert job.payload.to_json() == {"sessionId": "s-1", "mail": None}
    assert job.queue == "s-1"


def test_a_job_stored_with_the_dropped_fields_still_loads():
    """Jobs in an outbox written before lane, priority, recovery and commandFactId were
    dropped carry them still: they load and decode, the old keys unread."""
    mail = make_mail(reply_to=[addr()])
    old = {
        "queue": "s-child",
        "lane": "default",
        "priority": 0,
        "payload": {
            "sessionId": "s-child",
            "commandFactId": "spawn:s-child",
            "mail": mail.to_json(),
        },
        "recovery": {"policy": "retry"},
    }
    job = Job.from_json(json.loads(json.dumps(old)))
    assert job == Job("s-child", AgentPayload("s-child", mail))
    assert decode_agent_job(job) == AgentPayload("s-child", mail)
    assert set(job.to_json()) == {"queue", "payload"}


def test_agent_job_refuses_mail_for_another_session():
    mail = make_mail(to=Address("child", "s-other"))
    with pytest.raises(JobError) as exc:
        agent_job(AgentWork("s-child"), mail)
    assert exc.value.code == "mail-mismatch"
    assert "s-other" in exc.value.message and "s-child" in exc.value.message


@pytest.mark.parametrize("work", [None, {"sessionId": "s", "commandFactId": "f"}, "s"])
def test_agent_job_refuses_non_work(work):
    with pytest.raises(JobError) as exc:
        agent_job(work)
    assert exc.value.code == "bad-work"


@pytest.mark.parametrize("mail", ["mail", {"key": "k"}, 0])
def test_agent_job_refuses_non_mail(mail):
    with pytest.raises(JobError) as exc:
        agent_job(AgentWork("s-child"), mail)
    assert exc.value.code == "bad-mail"


def test_decode_round_trip_with_and_without_mail():
    mail = make_mail(reply_to=[addr("p0", "s0"), addr("p1", "s1")])
    job = agent_job(AgentWork("s-child"), mail)
    assert decode_agent_job(job) == AgentPayload("s-child", mail)
    bare = agent_job(AgentWork("s-child"))
    assert decode_agent_job(bare) == AgentPayload("s-child", None)


def test_decode_after_a_json_round_trip_of_the_job():
    job = make_job(n_reply=3)
    again = Job.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job
    assert decode_agent_job(again) == decode_agent_job(job)


def test_decode_accepts_payload_without_mail_key():
    job = Job.from_json({"queue": "s", "payload": {"sessionId": "s"}})
    assert decode_agent_job(job).mail is None


def _garbage_payloads():
    good = make_job().payload.to_json()
    yield "not-a-dict", "payload"
    yield None, "null"
    for value in (None, 1, "", "x" * 257):
        yield {**good, "sessionId": value}, f"sessionId={value!r:.10}"
    yield {k: v for k, v in good.items() if k != "sessionId"}, "no sessionId"
    for mail in ("mail", 5, [], {}, {**good["mail"], "to": None}, {**good["mail"], "key": ""}):
        yield {**good, "mail": mail}, f"mail={mail!r:.20}"
    other = make_mail(to=Address("child", "s-elsewhere")).to_json()
    yield {**good, "mail": other}, "mail for another session"
    yield {**good, "sessionId": "s-other"}, "payload session differs from queue"


@pytest.mark.parametrize(
    "payload", [p for p, _ in _garbage_payloads()], ids=[i for _, i in _garbage_payloads()]
)
def test_a_job_with_a_garbage_payload_is_refused_as_it_loads(payload):
    # Decoded once, as it loads: a job that does not decode is never made.
    with pytest.raises(JobError) as exc:
        Job.from_json({"queue": "s-child", "payload": payload})
    assert exc.value.code == "bad-job"


@pytest.mark.parametrize("job", [None, {"queue": "s"}, "job", make_job().payload])
def test_decode_refuses_non_jobs(job):
    with pytest.raises(JobError) as exc:
        decode_agent_job(job)
    assert exc.value.code == "bad-job"


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"queue": 1, "payload": {}},
        {"payload": {}},
        {"queue": "s", "payload": []},
        {"queue": "s", "lane": "default", "priority": 0},
    ],
)
def test_job_from_json_refuses_garbage(data):
    with pytest.raises(JobError) as exc:
        Job.from_json(data)
    assert exc.value.code == "bad-job"


# --------------------------------------------------------------------------- outcomes, body


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
def test_reply_outcome_mapping(outcome, said):
    assert reply_outcome(outcome) == said
    assert reply_outcome(outcome.value) == said  # plain strings work too


def test_outcome_values():
    assert [o.value for o in Outcome] == [
        "completed",
        "failed",
        "interrupted",
        "cancelled",
        "abandoned",
    ]


def test_an_outcome_stored_by_an_earlier_version_reads_as_interrupted():
    """Rows and events written before one vocabulary said outcome_unknown."""
    assert reply_outcome("outcome_unknown") == "interrupted"


@pytest.mark.parametrize("bad", ["done", "", None, 0, "COMPLETED"])
def test_unknown_outcome_is_refused(bad):
    with pytest.raises(JobError) as exc:
        reply_outcome(bad)
    assert exc.value.code == "bad-outcome"


def test_reply_body_exact_text():
    body = reply_body(Outcome.COMPLETED, "child", "child-session", "A test fixture was missing.")
    assert body == (
        "---\noutcome: completed\nagentId: child\nsessionId: child-session\n---\n\n"
        "A test fixture was missing."
    )
    assert header(body) == {
        "outcome": "completed",
        "agentId": "child",
        "sessionId": "child-session",
    }


@pytest.mark.parametrize(
    "outcome, said",
    [("failed", "failed"), ("outcome_unknown", "interrupted"), ("interrupted", "interrupted")],
)
def test_reply_body_says_the_jobs_own_word(outcome, said):
    body = reply_body(outcome, "child", "s-1", "")
    assert body == f"---\noutcome: {said}\nagentId: child\nsessionId: s-1\n---\n\n"


def test_reply_body_refuses_cancelled_and_bad_content():
    with pytest.raises(JobError) as exc:
        reply_body(Outcome.CANCELLED, "child", "s", "x")
    assert exc.value.code == "bad-outcome"
    with pytest.raises(JobError) as exc:
        reply_body(Outcome.COMPLETED, "child", "s", None)
    assert exc.value.code == "bad-content"


def test_reply_body_keeps_content_byte_for_byte():
    content = "---\noutcome: cancelled\n---\n\n\x00 ✓ 😀\r\n"
    body = reply_body("completed", "child", "s", content)
    assert body.endswith("\n---\n\n" + content)
    assert header(body)["outcome"] == "completed"


@pytest.mark.parametrize(
    "value",
    [
        "a\noutcome: completed",
        "x: y",
        "123",
        "0x1F",
        "1e3",
        "2024-01-01",
        "null",
        "yes",
        "~",
        "-dash",
        ".inf",
        "😀",
        "tab\there",
        "nel\x85ls\u2028ps\u2029",
        '"quoted"',
        "[list]",
        "#comment",
    ],
)
def test_reply_body_header_cannot_be_forged_or_mistyped(value):
    body = reply_body("interrupted", value, value, "c")
    # Still exactly three header lines, and a YAML reader gets the ids back as strings.
    assert body.count("\n") == 6
    assert header(body) == {"outcome": "interrupted", "agentId": value, "sessionId": value}


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
@settings(max_examples=100, deadline=None)
def test_reply_body_header_round_trips_any_ids(agent_id, session_id):
    # Lone surrogates cannot reach a YAML reader as UTF-8; ids come from UTF-8 wires.
    for s in (agent_id, session_id):
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return
    body = reply_body("completed", agent_id, session_id, "body")
    assert header(body) == {"outcome": "completed", "agentId": agent_id, "sessionId": session_id}
    assert body.endswith("\n---\n\nbody")


def test_reply_key_format():
    assert reply_key("task-1", 0) == "outbox:task-1:reply:0"
    assert reply_key("a:reply:1", 12) == "outbox:a:reply:1:reply:12"


# --------------------------------------------------------------------------- fan_out


def test_fan_out_writes_one_pending_row_per_reply_to():
    rig = Rig()
    job = make_job(n_reply=3)
    t = rig.clock.t
    assert rig.fan.fan_out(job, Outcome.COMPLETED, "Done.") == 3
    assert sorted(rig.outbox.rows) == [f"outbox:task-1:reply:{i}" for i in range(3)]
    task = decode_agent_job(job).mail
    for i in range(3):
        key = f"outbox:task-1:reply:{i}"
        row = rig.row(key)
        assert set(row) == {"mail", "attempts", "due"}
        assert row["attempts"] == 0 and row["due"] == t
        mail = JobMail.from_json(row["mail"])
        assert mail == JobMail(
            key=key,
            to=addr(f"p{i}", f"s-p{i}"),
            from_=task.to,
            reply_to=(),
            content="---\noutcome: completed\nagentId: child\nsessionId: s-child\n---\n\nDone.",
            created_at=t,
            outcome="completed",  # carried beside the body: the host never parses it back
        )
    assert rig.wakes == [t]  # one wake for the lot, at the earliest due
    assert rig.post.calls == []  # fan_out only writes


@pytest.mark.parametrize(
    "outcome, said",
    [
        ("completed", "completed"),
        ("failed", "failed"),
        ("outcome_unknown", "interrupted"),
        ("interrupted", "interrupted"),
    ],
)
async def test_each_outcome_reaches_every_recipient(outcome, said):
    rig = Rig()
    rig.fan.fan_out(make_job(n_reply=2), outcome, "content")
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=2)
    assert [m.to.agent_id for m in rig.post.calls] == ["p0", "p1"]
    for mail in rig.post.calls:
        assert header(mail.content) == {
            "outcome": said,
            "agentId": "child",
            "sessionId": "s-child",
        }
        assert mail.content.endswith("\n---\n\ncontent")


@pytest.mark.parametrize("outcome", [Outcome.CANCELLED, Outcome.ABANDONED])
async def test_cancelled_or_abandoned_job_is_quiet(outcome):
    rig = Rig()
    assert rig.fan.fan_out(make_job(n_reply=3), outcome, "x") == 0
    assert rig.outbox.rows == {} and rig.wakes == []
    assert await rig.fan.drain_outbox() == DrainReport()
    assert rig.post.calls == [] and rig.wakes == []


@pytest.mark.parametrize("outcome", list(Outcome))
async def test_job_without_mail_is_quiet(outcome):
    rig = Rig()
    job = agent_job(AgentWork("s-child"))
    assert rig.fan.fan_out(job, outcome, "x") == 0
    assert rig.outbox.rows == {} and rig.wakes == []
    await rig.fan.drain_outbox()
    assert rig.post.calls == []


def test_mail_without_reply_to_is_quiet():
    rig = Rig()
    assert rig.fan.fan_out(make_job(n_reply=0), Outcome.COMPLETED, "x") == 0
    assert rig.outbox.rows == {} and rig.wakes == []


@pytest.mark.parametrize(
    "job, outcome, content, code",
    [
        (make_job(), "done", "x", "bad-outcome"),
        (make_job(), Outcome.COMPLETED, None, "bad-content"),
        (make_job(), Outcome.COMPLETED, b"x", "bad-content"),
        (make_job().payload, Outcome.COMPLETED, "x", "bad-job"),
        (make_job().to_json(), Outcome.COMPLETED, "x", "bad-job"),  # not yet decoded
        (make_job(), "cancelled", 5, "bad-content"),  # validated even when quiet
    ],
)
def test_fan_out_refuses_bad_input_and_writes_nothing(job, outcome, content, code):
    rig = Rig()
    with pytest.raises(JobError) as exc:
        rig.fan.fan_out(job, outcome, content)
    assert exc.value.code == code
    assert rig.outbox.rows == {} and rig.wakes == []


def test_fan_out_replay_does_not_overwrite_pending_rows():
    rig = Rig()
    job = make_job(n_reply=2)
    rig.fan.fan_out(job, Outcome.COMPLETED, "first")
    before = dict(rig.outbox.rows)
    rig.clock.advance(5000)
    assert rig.fan.fan_out(job, Outcome.FAILED, "second") == 0
    assert rig.outbox.rows == before  # byte for byte
    assert len(rig.wakes) == 1  # nothing written, no new wake


def test_fan_out_fills_only_missing_rows():
    rig = Rig()
    job = make_job(n_reply=3)
    rig.outbox.put("outbox:task-1:reply:0", '{"receipt":1,"at":5}')
    rig.outbox.put("outbox:task-1:reply:2", "garbage the host left")
    assert rig.fan.fan_out(job, Outcome.COMPLETED, "x") == 1
    assert rig.outbox.rows["outbox:task-1:reply:0"] == '{"receipt":1,"at":5}'
    assert rig.outbox.rows["outbox:task-1:reply:2"] == "garbage the host left"
    assert rig.row("outbox:task-1:reply:1")["attempts"] == 0


async def test_long_task_key_still_gets_replies():
    rig = Rig()
    key = "k" * 256
    rig.fan.fan_out(make_job(key=key, n_reply=2), Outcome.COMPLETED, "x")
    assert await rig.fan.drain_outbox() == DrainReport(posted=2)
    assert [m.key for m in rig.post.accepted] == [reply_key(key, 0), reply_key(key, 1)]


# --------------------------------------------------------------------------- drain


async def test_drain_posts_and_replaces_rows_by_receipts():
    rig = Rig()
    rig.fan.fan_out(make_job(n_reply=3), Outcome.COMPLETED, "x")
    rig.clock.advance(7)
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=3)
    assert len(rig.post.accepted) == 3
    for i, mail in enumerate(rig.post.accepted):
        key = f"outbox:task-1:reply:{i}"
        assert mail.key == key
        assert rig.outbox.rows[key] == json.dumps(
            {"receipt": 1, "at": rig.clock.t}, separators=(",", ":")
        )
    assert len(rig.wakes) == 1  # only fan_out's; nothing left to wake for


async def test_replay_after_delivery_posts_nothing_again():
    rig = Rig()
    job = make_job(n_reply=3)
    rig.fan.fan_out(job, Outcome.COMPLETED, "x")
    await rig.fan.drain_outbox()
    receipts = dict(rig.outbox.rows)
    for outcome in Outcome:
        assert rig.fan.fan_out(job, outcome, "again") == 0
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(skipped_receipts=3)
    assert len(rig.post.calls) == 3
    assert rig.outbox.rows == receipts


async def test_replay_with_a_fresh_fan_out_instance_posts_nothing():
    # A restart: new FanOut, same durable outbox.
    rig = Rig()
    job = make_job(n_reply=2)
    rig.fan.fan_out(job, Outcome.COMPLETED, "x")
    await rig.fan.drain_outbox()
    fresh = FanOut(rig.outbox, rig.post, rig.wakes, rig.clock)
    assert fresh.fan_out(job, Outcome.COMPLETED, "x") == 0
    assert await fresh.drain_outbox() == DrainReport(skipped_receipts=2)
    assert len(rig.post.calls) == 2


async def test_receipts_are_never_deleted():
    rig = Rig(page_size=4)
    for k in range(10):
        rig.fan.fan_out(make_job(key=f"t{k}"), Outcome.COMPLETED, "x")
    for _ in range(5):
        await rig.drain_pass()
        rig.clock.advance(10**9)
    assert len(rig.outbox.rows) == 10
    assert all(json.loads(v)["receipt"] == 1 for v in rig.outbox.rows.values())
    assert len(rig.post.calls) == 10


async def test_refusal_retries_with_backoff_then_delivers():
    rig = Rig(retry_base_ms=1000, retry_max_ms=300_000)
    rig.post.refuse = {"p1"}
    rig.fan.fan_out(make_job(n_reply=3), Outcome.COMPLETED, "x")
    t0 = rig.clock.t
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=2, retried=1)
    row = rig.row("outbox:task-1:reply:1")
    assert row["attempts"] == 1 and row["due"] == t0 + 1000
    assert rig.wakes == [t0, t0 + 1000]

    # Not yet due: left alone, not posted, wake re-armed for it.
    rig.clock.advance(999)
    before = rig.outbox.rows["outbox:task-1:reply:1"]
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(skipped_receipts=2, waiting=1)
    assert rig.outbox.rows["outbox:task-1:reply:1"] == before
    assert len(rig.post.calls) == 3
    assert rig.wakes[-1] == t0 + 1000

    rig.clock.advance(1)
    report = await rig.fan.drain_outbox()
    assert report.retried == 1
    row = rig.row("outbox:task-1:reply:1")
    assert row["attempts"] == 2 and row["due"] == rig.clock.t + 2000
    assert rig.wakes[-1] == rig.clock.t + 2000

    rig.post.refuse = set()
    rig.clock.advance(2000)
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=1, skipped_receipts=2)
    assert [m.to.agent_id for m in rig.post.accepted] == ["p0", "p2", "p1"]
    assert json.loads(rig.outbox.rows["outbox:task-1:reply:1"])["receipt"] == 1


class MailroomError(Exception):
    pass


@pytest.mark.parametrize(
    "exc", [RuntimeError, OSError, ValueError, KeyError, MailroomError, trio.BrokenResourceError]
)
async def test_exception_in_post_is_a_retry_and_never_escapes(exc):
    rig = Rig()
    rig.post.raise_for = {"p0"}
    rig.post.exc = exc
    rig.fan.fan_out(make_job(n_reply=2), Outcome.COMPLETED, "x")
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=1, retried=1)
    row = rig.row("outbox:task-1:reply:0")
    assert row["attempts"] == 1 and row["due"] == rig.clock.t + 1000
    rig.post.raise_for = set()
    rig.clock.advance(1000)
    assert await rig.fan.drain_outbox() == DrainReport(posted=1, skipped_receipts=1)
    assert Counter(m.key for m in rig.post.accepted) == {
        "outbox:task-1:reply:0": 1,
        "outbox:task-1:reply:1": 1,
    }


@pytest.mark.parametrize("answer", [None, 1, "yes", False])
async def test_only_true_counts_as_accepted(answer):
    rig = Rig()

    async def post(mail):
        return answer

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock)
    rig.fan.fan_out(make_job(), Outcome.COMPLETED, "x")
    assert await rig.fan.drain_outbox() == DrainReport(retried=1)
    assert rig.row("outbox:task-1:reply:0")["attempts"] == 1


def test_backoff_doubles_and_caps():
    fan = FanOut(FakeOutbox(), FakePost(), Wakes(), FakeClock(), retry_max_ms=5000)
    assert [fan.backoff_ms(a) for a in range(6)] == [1000, 2000, 4000, 5000, 5000, 5000]
    assert fan.backoff_ms(10_000) == 5000


async def test_backoff_sequence_through_drains():
    rig = Rig(retry_base_ms=100, retry_max_ms=1000)
    rig.post.refuse = {"p0"}
    rig.fan.fan_out(make_job(), Outcome.COMPLETED, "x")
    delays = []
    for _ in range(7):
        await rig.fan.drain_outbox()
        row = rig.row("outbox:task-1:reply:0")
        delays.append(row["due"] - rig.clock.t)
        rig.clock.t = row["due"]
    assert delays == [100, 200, 400, 800, 1000, 1000, 1000]
    assert rig.row("outbox:task-1:reply:0")["attempts"] == 7


async def test_empty_outbox_drain_does_nothing():
    rig = Rig()
    assert await rig.fan.drain_outbox() == DrainReport()
    assert rig.wakes == [] and rig.post.calls == []
    assert rig.fan._cursor is None


async def test_garbage_rows_are_skipped_counted_and_kept():
    rig = Rig()
    garbage = {
        "outbox:a": "not json",
        "outbox:b": "[1, 2]",
        "outbox:c": '{"mail": {}, "attempts": 0, "due": 0}',
        "outbox:d": '{"attempts": 0, "due": 0}',
        "outbox:e": json.dumps({"mail": make_mail().to_json(), "attempts": -1, "due": 0}),
        "outbox:f": json.dumps({"mail": make_mail().to_json(), "attempts": 0, "due": "now"}),
        "outbox:g": "",
    }
    rig.outbox.rows.update(garbage)
    rig.fan.fan_out(make_job(n_reply=2), Outcome.COMPLETED, "x")
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(posted=2, bad=len(garbage))
    for key, value in garbage.items():
        assert rig.outbox.rows[key] == value
    assert pending(rig) == 0


async def test_not_yet_due_rows_are_left_alone():
    rig = Rig()
    later = rig.clock.t + 50_000
    rig.outbox.put("outbox:task-1:reply:0", pending_json(make_mail(), 3, later))
    before = dict(rig.outbox.rows)
    report = await rig.fan.drain_outbox()
    assert report == DrainReport(waiting=1)
    assert rig.outbox.rows == before
    assert rig.post.calls == []
    assert rig.wakes == [later]


async def test_wake_is_the_earliest_due_across_pages():
    rig = Rig(page_size=2)
    t = rig.clock.t
    mail = make_mail()
    rig.outbox.put("outbox:a", pending_json(mail, 2, t + 5000))
    rig.outbox.put("outbox:b", pending_json(mail, 0, t))
    rig.outbox.put("outbox:c", pending_json(mail, 2, t + 3000))
    first = await rig.fan.drain_outbox()
    assert first == DrainReport(waiting=1, posted=1, more=True)
    assert rig.wakes == [t]  # a full page: continue at once
    second = await rig.fan.drain_outbox()
    assert second == DrainReport(waiting=1)
    assert rig.wakes == [t, t + 3000]  # the pass ends: the earliest over both pages
    # Next pass: the earliest is now on the first page, and c comes due.
    rig.clock.t = t + 3000
    reports = await rig.drain_pass()
    assert [r.posted for r in reports] == [0, 1]
    assert rig.wakes == [t, t + 3000, t + 3000, t + 5000]
    assert [m.key for m in rig.post.accepted] == ["task-1", "task-1"]


async def test_retry_due_counts_towards_the_pass_wake():
    rig = Rig(page_size=1, retry_base_ms=700)
    rig.post.refuse = {"p0"}
    rig.fan.fan_out(make_job(n_reply=2), Outcome.COMPLETED, "x")
    t = rig.clock.t
    reports = await rig.drain_pass()
    assert [r.retried for r in reports] == [1, 0, 0]
    assert [r.posted for r in reports] == [0, 1, 0]
    assert rig.wakes == [t, t, t, t + 700]


async def test_paging_1000_replies_with_immediate_wakes():
    rig = Rig()  # default page size 64
    for k in range(10):
        assert rig.fan.fan_out(make_job(key=f"job-{k:02d}", n_reply=100), "completed", "x") == 100
    t = rig.clock.t
    assert rig.wakes == [t] * 10
    reports = await rig.drain_pass()
    # 1000 = 15 full pages of 64 + one of 40.
    assert len(reports) == 16
    assert [r.more for r in reports] == [True] * 15 + [False]
    assert [r.posted for r in reports] == [64] * 15 + [40]
    assert rig.wakes == [t] * 10 + [t] * 15  # one immediate wake per full page
    keys = Counter(m.key for m in rig.post.accepted)
    assert len(keys) == 1000 and set(keys.values()) == {1}
    assert all(limit == 64 for limit, _ in rig.outbox.list_calls)
    assert rig.fan._cursor is None
    # The next pass only sees receipts.
    reports = await rig.drain_pass()
    assert sum(r.skipped_receipts for r in reports) == 1000
    assert sum(r.posted for r in reports) == 0
    assert len(rig.post.calls) == 1000


async def test_exact_multiple_of_page_size_ends_with_an_empty_page():
    rig = Rig(page_size=8)
    rig.fan.fan_out(make_job(n_reply=16), "completed", "x")
    reports = await rig.drain_pass()
    assert [(r.posted, r.more) for r in reports] == [(8, True), (8, True), (0, False)]


async def test_cursor_continues_from_the_last_key():
    rig = Rig(page_size=3)
    rig.fan.fan_out(make_job(n_reply=5), "completed", "x")
    await rig.fan.drain_outbox()
    assert rig.fan._cursor == "outbox:task-1:reply:2"
    await rig.fan.drain_outbox()
    assert rig.fan._cursor is None
    assert [after for _, after in rig.outbox.list_calls] == [None, "outbox:task-1:reply:2"]


async def test_fan_out_behind_the_cursor_is_not_stranded():
    rig = Rig(page_size=2)
    rig.fan.fan_out(make_job(key="m", n_reply=3), "completed", "x")
    await rig.fire()
    assert rig.fan._cursor == "outbox:m:reply:1"
    # Written behind the cursor, mid-pass: this pass will not list it.
    rig.fan.fan_out(make_job(key="a"), "completed", "x")
    report = await rig.fire()
    assert report.posted == 1 and not report.more
    # The pass end arms the timer again at once, for a fresh pass.
    assert len(rig.wakes) > rig.consumed and rig.wakes[-1] <= rig.clock.t
    await rig.run_timers()
    assert Counter(m.key for m in rig.post.accepted) == {
        "outbox:m:reply:0": 1,
        "outbox:m:reply:1": 1,
        "outbox:m:reply:2": 1,
        "outbox:a:reply:0": 1,
    }


async def test_fan_out_during_an_in_flight_drain_is_not_stranded():
    rig = Rig(page_size=2)
    late = make_job(key="a")  # its reply key sorts before the page being posted

    async def post(mail):
        if len(rig.post.calls) == 0:
            # The job settles while the drain awaits the mailroom.
            assert rig.fan.fan_out(late, "completed", "late") == 1
        return await rig.post(mail)

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock, page_size=2)
    rig.fan.fan_out(make_job(key="m", n_reply=3), "completed", "x")
    await rig.run_timers()
    assert Counter(m.key for m in rig.post.accepted) == {
        "outbox:m:reply:0": 1,
        "outbox:m:reply:1": 1,
        "outbox:m:reply:2": 1,
        "outbox:a:reply:0": 1,
    }


async def test_concurrent_drain_is_refused_and_the_wake_kept():
    rig = Rig()
    nested: list[DrainReport] = []

    async def post(mail):
        if not nested:
            # The host fires another wake while this drain awaits the mailroom.
            nested.append(await rig.fan.drain_outbox())
        return await rig.post(mail)

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock)
    rig.fan.fan_out(make_job(n_reply=2), "completed", "x")
    report = await rig.fan.drain_outbox()
    assert nested == [DrainReport(busy=True)]
    assert report == DrainReport(posted=2)
    assert rig.wakes == [rig.clock.t, rig.clock.t]  # fan_out's, then the kept one
    assert len(rig.post.calls) == 2
    assert await rig.fan.drain_outbox() == DrainReport(skipped_receipts=2)


async def test_concurrent_drains_under_trio_post_each_reply_once():
    rig = Rig(page_size=4)
    gate = trio.Event()

    async def post(mail):
        await gate.wait()
        return await rig.post(mail)

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock, page_size=4)
    rig.fan.fan_out(make_job(n_reply=6), "completed", "x")
    reports: list[DrainReport] = []

    async def drain():
        reports.append(await rig.fan.drain_outbox())

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert sum(r.busy for r in reports) == 2
    await rig.run_timers()
    assert Counter(m.key for m in rig.post.accepted) == {
        reply_key("task-1", i): 1 for i in range(6)
    }


async def test_cancellation_propagates_and_leaves_the_row_pending():
    rig = Rig()
    scopes: list[trio.CancelScope] = []

    async def post(mail):
        if len(scopes) == 1:
            scopes[0].cancel()
            await trio.lowlevel.checkpoint()  # raises Cancelled
            raise AssertionError("not reached")
        return await rig.post(mail)

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock)
    rig.fan.fan_out(make_job(), "completed", "x")
    before = dict(rig.outbox.rows)
    with trio.CancelScope() as scope:
        scopes.append(scope)
        await rig.fan.drain_outbox()
    assert scope.cancelled_caught
    assert rig.outbox.rows == before
    # The same instance is not stuck "busy" afterwards.
    scopes.append(scope)
    assert await rig.fan.drain_outbox() == DrainReport(posted=1)
    assert len(rig.post.accepted) == 1


async def test_cancelled_drain_does_not_leave_the_instance_busy():
    rig = Rig()
    calls = 0

    async def post(mail):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyboardInterrupt  # a BaseException is not swallowed
        return True

    rig.fan = FanOut(rig.outbox, post, rig.wakes, rig.clock)
    rig.fan.fan_out(make_job(), "completed", "x")
    with pytest.raises(KeyboardInterrupt):
        await rig.fan.drain_outbox()
    assert rig.row("outbox:task-1:reply:0")["attempts"] == 0
    assert await rig.fan.drain_outbox() == DrainReport(posted=1)


async def test_refused_replies_stay_pending():
    rig = Rig(page_size=3)
    rig.post.refuse = {"p1"}
    rig.fan.fan_out(make_job(n_reply=7), "completed", "x")
    assert pending(rig) == 7
    await rig.drain_pass()
    assert pending(rig) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"page_size": 0},
        {"page_size": True},
        {"retry_base_ms": 0},
        {"retry_base_ms": 10, "retry_max_ms": 5},
    ],
)
def test_fan_out_config_is_checked(kwargs):
    with pytest.raises(JobError) as exc:
        FanOut(FakeOutbox(), FakePost(), Wakes(), FakeClock(), **kwargs)
    assert exc.value.code == "bad-config"


# --------------------------------------------------------------------------- properties


ops = st.lists(
    st.one_of(
        st.tuples(st.just("fan"), st.integers(0, 5)),
        st.tuples(st.just("drain")),
        st.tuples(st.just("tick"), st.integers(0, 5000)),
    ),
    max_size=40,
)


@given(
    jobs_spec=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(list(Outcome))), min_size=1, max_size=6
    ),
    script=ops,
    page_size=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=100, deadline=None)
def test_property_every_reply_posted_exactly_once(jobs_spec, script, page_size, seed):
    rng = random.Random(seed)

    async def scenario():
        rig = Rig(page_size=page_size, retry_base_ms=100, retry_max_ms=2000)
        # Each job settles once with its outcome; every "fan" op is a replay of it.
        jobs = [make_job(key=f"job-{i}", n_reply=n) for i, (n, _) in enumerate(jobs_spec)]
        outcomes = [o for _, o in jobs_spec]

        def flaky(mail):
            roll = rng.random()
            if roll < 0.15:
                raise RuntimeError("mailroom hiccup")
            return roll >= 0.45

        rig.post.decide = flaky
        for op in script:
            if op[0] == "fan":
                i = op[1] % len(jobs)
                rig.fan.fan_out(jobs[i], outcomes[i], f"content {i}")
            elif op[0] == "drain":
                await rig.fire()
            else:
                rig.clock.advance(op[1])
            # Invariant at every step: nothing accepted twice.
            assert max(Counter(m.key for m in rig.post.accepted).values(), default=0) <= 1
        # Every job settles (for some, a replay); from here only the wakes drive drains.
        for i, job in enumerate(jobs):
            rig.fan.fan_out(job, outcomes[i], f"content {i}")
        await rig.run_timers()

        expected = {}
        for i, (n, outcome) in enumerate(jobs_spec):
            if reply_outcome(outcome) is None:  # cancelled or abandoned: quiet
                continue
            for r in range(n):
                expected[reply_key(f"job-{i}", r)] = (i, r)
        assert Counter(m.key for m in rig.post.accepted) == Counter(expected.keys())
        for mail in rig.post.accepted:
            i, r = expected[mail.key]
            assert mail.to == addr(f"p{r}", f"s-p{r}")
            assert mail.from_ == CHILD
            assert header(mail.content)["outcome"] == reply_outcome(outcomes[i])
            assert mail.content.endswith(f"\n---\n\ncontent {i}")
        assert pending(rig) == 0
        # A full replay now is harmless.
        for i, job in enumerate(jobs):
            assert rig.fan.fan_out(job, outcomes[i], "again") == 0
        before = len(rig.post.calls)
        await rig.run_timers()
        assert len(rig.post.calls) == before

    trio.run(scenario)


@given(
    page_size=st.integers(1, 20),
    # Keys as a caller may choose them: no control characters (benchd.core.keys).
    keys=st.sets(
        st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=12),
        max_size=150,
    ),
    kinds=st.randoms(use_true_random=False),
)
@settings(max_examples=100, deadline=None)
def test_property_a_full_pass_visits_every_row_once(page_size, keys, kinds):
    async def scenario():
        rig = Rig(page_size=page_size)
        t = rig.clock.t
        expected = Counter()
        for k in keys:
            key = reply_key(k, 0)
            kind = kinds.choice(["pending", "pending", "receipt", "garbage", "later"])
            if kind in ("pending", "later"):
                due = t if kind == "pending" else t + 10_000
                mail = JobMail(key, addr(), CHILD, (), "c", 0)
                rig.outbox.put(key, pending_json(mail, 0, due))
            elif kind == "receipt":
                rig.outbox.put(key, '{"receipt":1,"at":1}')
            else:
                rig.outbox.put(key, "{not json")
            expected[kind] += 1
        reports = await rig.drain_pass()
        n = len(keys)
        assert len(reports) == n // page_size + 1
        assert [r.more for r in reports] == [True] * (n // page_size) + [False]
        assert sum(r.posted for r in reports) == expected["pending"]
        assert sum(r.skipped_receipts for r in reports) == expected["receipt"]
        assert sum(r.bad for r in reports) == expected["garbage"]
        assert sum(r.waiting for r in reports) == expected["later"]
        posted = Counter(m.key for m in rig.post.calls)
        assert all(c == 1 for c in posted.values())
        # Pages are disjoint, ascending, and cover the outbox exactly.
        afters = [after for _, after in rig.outbox.list_calls]
        assert afters[0] is None
        assert afters[1:] == sorted(rig.outbox.rows)[page_size - 1 :: page_size][: n // page_size]
        assert rig.wakes == [t] * (n // page_size) + ([t + 10_000] if expected["later"] else [])
        assert rig.fan._cursor is None

    trio.run(scenario)


def test_fan_out_writes_one_reply_per_address_however_often_it_is_listed():
    rig = Rig()
    same = [addr("bob", "s-bob")] * 16 + [addr("carol", "s-carol"), addr("bob", "s-bob")]
    job = agent_job(AgentWork(CHILD.session_id), make_mail("dup", same))
    assert rig.fan.fan_out(job, Outcome.COMPLETED, "Done.") == 2
    assert sorted(json.loads(v)["mail"]["to"]["agentId"] for v in rig.outbox.rows.values()) == [
        "bob",
        "carol",
    ]
    assert rig.fan.fan_out(job, Outcome.COMPLETED, "Done.") == 0  # a replay adds nothing
