"""Agent jobs and reply fan-out: the job fan-out core, with no I/O of its own.

A parent delegates work to a child session and is owed a reply, whatever happens.
This module holds the pure logic of that promise; the daemon supplies the I/O.

Concepts:

* **Address** -- ``{"kind": "agent", "agentId", "sessionId"}``; both ids are 1-256
  characters. In bench an agentId is a handle and a sessionId a session id.
* **JobMail** -- the task mail of a job: a stable ``key`` (it names the request across
  retries and every reply key derives from it), ``to``, ``from``, a ``replyTo`` list,
  string ``content`` and ``createdAt`` in milliseconds.
* **Job** -- what :func:`agent_job` returns for the host's job queue: queue = target
  session id, and its payload, an :class:`AgentPayload` Struct (the session and the
  task mail), decoded once when the job is made or read back (:meth:`Job.from_json`).
  The stored form is ``{"queue", "payload": {"sessionId", "mail"}}``; jobs stored
  before lane, priority, recovery and commandFactId were dropped still load: those
  keys are ignored.
* **Fan-out** -- when a job settles, :meth:`FanOut.fan_out` writes one pending reply
  per replyTo address into the durable *outbox* under ``outbox:<mail key>:reply:<i>``
  and schedules one wake. :meth:`FanOut.drain_outbox` (run on that wake) posts due
  replies a page at a time, retries refusals with exponential backoff, and replaces a
  delivered reply's row by a compact *receipt* under the same key, so replaying a
  settlement after a crash posts nothing twice.
* **Host ports** -- :class:`Outbox` (string rows), :class:`Post` (async delivery),
  :class:`ScheduleWake` (a durable timer) and :class:`Now` (milliseconds). Tests use
  in-memory fakes; the daemon wires durable ones.

Delivery is at-least-once at the post boundary: if the host dies after ``post``
accepted a reply but before the receipt was written, the reply is posted again on
the next drain. Replies carry stable keys so the mailroom can recognise a repeat.

Row formats in the outbox (compact JSON strings)::

    pending: {"mail": <reply mail json>, "attempts": 0, "due": <ms>}
    receipt: {"receipt": 1, "at": <ms>}

No event loop is imported here: ``post`` and ``drain_outbox`` are plain coroutines
and the host decides what runs them.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import msgspec

from benchd.core.frontmatter import scalar
from benchd.core.jobmail import MAX_ID_LEN as MAX_ID_LEN
from benchd.core.jobmail import MAX_KEY_LEN as MAX_KEY_LEN
from benchd.core.jobmail import Address as Address
from benchd.core.jobmail import JobError as JobError
from benchd.core.jobmail import JobMail as JobMail
from benchd.core.jobmail import check_id, decode_json
from benchd.core.keys import reply_key

__all__ = [
    "MAX_ID_LEN",
    "MAX_KEY_LEN",
    "Address",
    "AgentPayload",
    "AgentWork",
    "DrainReport",
    "FanOut",
    "Job",
    "JobError",
    "JobMail",
    "Now",
    "Outbox",
    "Outcome",
    "Post",
    "ScheduleWake",
    "agent_job",
    "decode_agent_job",
    "reply_body",
    "reply_key",
    "reply_outcome",
]

# --------------------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True)
class AgentWork:
    """Work for a child session: the session that runs it."""

    session_id: str

    def __post_init__(self) -> None:
        try:
            check_id(self.session_id, "work sessionId")
        except JobError as exc:
            raise JobError("bad-work", exc.message) from None


class AgentPayload(msgspec.Struct, frozen=True, rename="camel"):
    """A job's payload, decoded: the session that runs it and its task mail (None: a
    job without one). Its JSON form: ``{"sessionId": ..., "mail": <mail> | null}``."""

    session_id: str
    mail: JobMail | None = None

    def __post_init__(self) -> None:
        check_id(self.session_id, "payload sessionId")
        if self.mail is not None and not isinstance(self.mail, JobMail):
            raise JobError("bad-mail", f"mail must be a JobMail or None, not {_kind(self.mail)}.")

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "mail": None if self.mail is None else self.mail.to_json(),
        }


class Job(msgspec.Struct, frozen=True):
    """A queued job as the host's queue sees it: its queue (the session that runs it)
    and its payload, decoded once, when the job is made (:func:`agent_job`) or read
    back (:meth:`from_json`). A job whose queue and payload disagree is not made."""

    queue: str
    payload: AgentPayload

    def __post_init__(self) -> None:
        if not isinstance(self.payload, AgentPayload):
            raise JobError(
                "bad-job", f"a job payload must be an AgentPayload, not {_kind(self.payload)}."
            )
        session_id, mail = self.payload.session_id, self.payload.mail
        # The queue is the session; a payload that disagrees with either was not made here.
        if self.queue != session_id:
            raise JobError("bad-job", "the job queue and its payload sessionId differ.")
        if mail is not None and mail.to.session_id != session_id:
            raise JobError("bad-job", "the job mail is addressed to another session.")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict, for hosts that persist jobs (the outbox stores it as is)."""
        return {"queue": self.queue, "payload": self.payload.to_json()}

    @classmethod
    def from_json(cls, data: object) -> Job:
        """Rebuild a job from :meth:`to_json`, checked; any malformation is ``bad-job``.

        Other keys are ignored: jobs stored by earlier versions also carry ``lane``,
        ``priority`` and ``recovery`` (and their payloads ``commandFactId``), which
        nothing read."""
        try:
            return decode_json(data, cls, "bad-job", "a job")
        except JobError as exc:
            raise JobError("bad-job", exc.message) from None


def _kind(value: object) -> str:
    return type(value).__name__


def agent_job(work: AgentWork, mail: JobMail | None = None) -> Job:
    """Validate ``work`` (and the optional task ``mail``) and return the job to queue.

    Synchronous and side-effect free, so the host can call it inside the same
    transaction that enqueues the job. The mail must be addressed to the session
    that runs the work (``mail-mismatch`` otherwise).
    """
    if not isinstance(work, AgentWork):
        raise JobError("bad-work", f"work must be an AgentWork, not {_kind(work)}.")
    if mail is not None and not isinstance(mail, JobMail):
        raise JobError("bad-mail", f"mail must be a JobMail or None, not {_kind(mail)}.")
    if mail is not None and mail.to.session_id != work.session_id:
        raise JobError(
            "mail-mismatch",
            f"the mail is addressed to session {mail.to.session_id!r} "
            f"but the work runs in session {work.session_id!r}.",
        )
    return Job(queue=work.session_id, payload=AgentPayload(work.session_id, mail))


def decode_agent_job(job: Job) -> AgentPayload:
    """A job's payload (decoded when the job was made or read back)."""
    if not isinstance(job, Job):
        raise JobError("bad-job", f"expected a Job, not {_kind(job)}.")
    return job.payload


# --------------------------------------------------------------------------- outcomes, replies


class Outcome(enum.StrEnum):
    """How a job settled: the words of bench_wire.outcomes (one vocabulary everywhere)."""

    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    # The spawn failed before the child ran: nothing was started, so nothing is owed.
    ABANDONED = "abandoned"


# Every ending but two is said to the correspondents in the same word. Cancellation is
# deliberate, so it is quiet (None: no replies), and an abandoned job never ran (its
# spawner was told the spawn failed).
_REPLY_OUTCOMES: dict[Outcome, str | None] = {
    Outcome.COMPLETED: "completed",
    Outcome.FAILED: "failed",
    Outcome.INTERRUPTED: "interrupted",
    Outcome.CANCELLED: None,
    Outcome.ABANDONED: None,
}
# Stored by earlier versions (a job whose daemon died under it): read as interrupted.
_OLD_OUTCOMES = {"outcome_unknown": Outcome.INTERRUPTED}


def _outcome(value: object) -> Outcome:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return _OLD_OUTCOMES.get(value) or Outcome(value)
    except ValueError:
        raise JobError("bad-outcome", f"unknown job outcome {value!r}.") from None


def reply_outcome(outcome: Outcome | str) -> str | None:
    """The outcome a reply reports (the job's own word), or None for no reply."""
    return _REPLY_OUTCOMES[_outcome(outcome)]


_DETAIL_NAME = re.compile(r"[a-z][A-Za-z0-9]{0,31}")
_FIXED_FIELDS = frozenset({"outcome", "agentId", "sessionId"})


def _detail_lines(details: Mapping[str, str | int] | None) -> str:
    """Extra header lines after the fixed three: how the job ended, for a host to say.

    Names are camelCase words; an int is written plain (a YAML integer), a string as
    any other header value.
    """
    if not details:
        return ""
    if not isinstance(details, Mapping):
        raise JobError("bad-content", "reply details must be a mapping.")
    lines = []
    for name, value in details.items():
        if not isinstance(name, str) or not _DETAIL_NAME.fullmatch(name) or name in _FIXED_FIELDS:
            raise JobError(
                "bad-content", f"reply detail name {name!r} is not a new camelCase word."
            )
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise JobError("bad-content", f"reply detail {name} must be a string or an integer.")
        text = str(value) if isinstance(value, int) else scalar(value)
        lines.append(f"{name}: {text}\n")
    return "".join(lines)


def reply_body(
    outcome: Outcome | str,
    agent_id: str,
    session_id: str,
    content: str,
    details: Mapping[str, str | int] | None = None,
) -> str:
    """The body of a reply: a small front-matter header, a blank line, then ``content``.

    ``outcome`` may be a job :class:`Outcome` or an already mapped reply outcome; it
    is written as the reply outcome. A cancelled outcome has no reply body. ``details``
    are extra header fields after ``sessionId`` (e.g. bench's ``ended``, ``exitCode``).
    """
    said = reply_outcome(outcome)
    if said is None:
        raise JobError("bad-outcome", f"a job {outcome} sends no replies.")
    if not isinstance(content, str):
        raise JobError("bad-content", "reply content must be a string.")
    return (
        f"---\noutcome: {said}\nagentId: {scalar(check_id(agent_id, 'agentId'))}\n"
        f"sessionId: {scalar(check_id(session_id, 'sessionId'))}\n"
        f"{_detail_lines(details)}---\n\n{content}"
    )


# --------------------------------------------------------------------------- host ports


class Outbox(Protocol):
    """Durable string rows. ``list`` returns up to ``limit`` rows with keys strictly
    greater than ``after_key`` (all rows when None), ordered by key ascending. Rows are
    never deleted: a delivered reply's row becomes its receipt, so a replay finds it."""

    def put(self, key: str, value: str) -> None: ...

    def read(self, key: str) -> str | None: ...

    def list(self, limit: int, after_key: str | None) -> list[tuple[str, str]]: ...


class Post(Protocol):
    """Deliver one reply into its recipient's mailbox; True when it was accepted.

    Only ``True`` itself counts: a forgotten ``return`` (None) is a refusal, so the
    reply is retried rather than marked delivered.
    """

    def __call__(self, mail: JobMail) -> Awaitable[bool]: ...


class ScheduleWake(Protocol):
    """Arm a durable timer that runs :meth:`FanOut.drain_outbox` at ``at_ms``."""

    def __call__(self, at_ms: int) -> None: ...


class Now(Protocol):
    """The current time in milliseconds."""

    def __call__(self) -> int: ...


# --------------------------------------------------------------------------- rows


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _pending_row(mail: JobMail, attempts: int, due: int) -> str:
    return _dumps({"mail": mail.to_json(), "attempts": attempts, "due": due})


def _receipt_row(at: int) -> str:
    return _dumps({"receipt": 1, "at": at})


@dataclass(frozen=True, slots=True)
class _Pending:
    mail: JobMail
    attempts: int
    due: int


_RECEIPT = object()


def _is_count(n: object) -> TypeGuard[int]:
    """A stored count: a non-negative int (JSON's true and false are not counts)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _parse_row(value: str) -> _Pending | object | None:
    """A pending reply, ``_RECEIPT``, or None for a row this module did not write."""
    try:
        obj = json.loads(value)
    except (ValueError, TypeError):
        return None
    if not isinstance(obj, dict):
        return None
    if "receipt" in obj:
        return _RECEIPT
    attempts, due = obj.get("attempts"), obj.get("due")
    if not (_is_count(attempts) and _is_count(due)):
        return None
    try:
        mail = JobMail.from_json(obj.get("mail"))
    except JobError:
        return None
    return _Pending(mail, attempts, due)


# --------------------------------------------------------------------------- fan-out


@dataclass(slots=True)
class DrainReport:
    """What one :meth:`FanOut.drain_outbox` call did.

    ``posted``: replies accepted and turned into receipts. ``retried``: refusals and
    exceptions, rescheduled with backoff. ``skipped_receipts``: receipt rows passed
    over. ``waiting``: pending rows not yet due. ``bad``: rows that could not be
    parsed, left in place. ``more``: the page was full, so an immediate wake was
    scheduled to continue. ``busy``: another drain was running; this one did nothing
    and the running one will schedule a wake when it ends.
    """

    posted: int = 0
    retried: int = 0
    skipped_receipts: int = 0
    waiting: int = 0
    bad: int = 0
    more: bool = False
    busy: bool = False


class FanOut:
    """Writes replies for settled jobs into the outbox and drains them through ``post``.

    One instance per outbox. Its only in-memory state is the drain cursor and the
    earliest due seen in the current pass; losing it (a restart) merely starts the
    next pass from the first row.
    """

    def __init__(
        self,
        outbox: Outbox,
        post: Post,
        schedule_wake: ScheduleWake,
        now: Now,
        *,
        page_size: int = 64,
        retry_base_ms: int = 1000,
        retry_max_ms: int = 300_000,
    ) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise JobError("bad-config", "page_size must be a positive integer.")
        if retry_base_ms < 1 or retry_max_ms < retry_base_ms:
            raise JobError("bad-config", "need 1 <= retry_base_ms <= retry_max_ms.")
        self._outbox = outbox
        self._post = post
        self._schedule_wake = schedule_wake
        self._now = now
        self.page_size = page_size
        self.retry_base_ms = retry_base_ms
        self.retry_max_ms = retry_max_ms
        self._cursor: str | None = None
        # Earliest due of a pending row that this pass saw in the future or may have
        # missed; scheduled as the wake when the pass ends. None: nothing owed.
        self._pass_earliest: int | None = None
        self._draining = False
        self._rerun = False

    def backoff_ms(self, attempts: int) -> int:
        """Delay before the next try after a failure of try number ``attempts`` (0-based)."""
        # Cap the exponent first so a long-refused reply never builds a huge integer.
        if attempts >= 62:
            return self.retry_max_ms
        delay: int = self.retry_base_ms * 2**attempts
        return min(self.retry_max_ms, delay)

    def _owe(self, due: int) -> None:
        if self._pass_earliest is None or due < self._pass_earliest:
            self._pass_earliest = due

    def fan_out(
        self,
        job: Job,
        outcome: Outcome | str,
        content: str,
        details: Mapping[str, str | int] | None = None,
    ) -> int:
        """Write one pending reply per replyTo address of the job's mail.

        ``details`` are extra reply header fields (see :func:`reply_body`).

        Existing rows (pending, receipt, or anything else) are never overwritten, so
        replaying a settlement is harmless. Schedules one wake if anything was
        written. Returns the number of rows written. Cancelled jobs and jobs without
        mail write nothing.
        """
        said = reply_outcome(outcome)  # validates the outcome even when quiet
        if not isinstance(content, str):
            raise JobError("bad-content", "reply content must be a string.")
        task = decode_agent_job(job).mail
        _detail_lines(details)  # validates the details even when quiet
        if said is None or task is None or not task.reply_to:
            return 0
        now = self._now()
        body = reply_body(said, task.to.agent_id, task.to.session_id, content, details)
        written = 0
        seen: set[str] = set()
        for index, recipient in enumerate(task.reply_to):
            if recipient.agent_id in seen:
                continue  # the same address listed again: one copy (keys keep their index)
            seen.add(recipient.agent_id)
            key = reply_key(task.key, index)
            if self._outbox.read(key) is not None:
                continue
            reply = JobMail(
                key=key,
                to=recipient,
                from_=task.to,
                reply_to=(),
                content=body,
                created_at=now,
                outcome=said,
            )
            self._outbox.put(key, _pending_row(reply, attempts=0, due=now))
            written += 1
        if written:
            # A pass already under way (cursor set, or a drain awaiting post) may have
            # listed past these keys; make its end wake a fresh pass instead of
            # leaving the rows to a timer that might fire mid-pass.
            if self._cursor is not None or self._draining:
                self._owe(now)
            self._schedule_wake(now)
        return written

    async def drain_outbox(self) -> DrainReport:
        """Post the due replies of one page of the outbox and schedule the next wake.

        Never raises because of ``post`` (a raise counts as a refusal) nor because of
        a row it cannot parse (counted as ``bad`` and left alone). Cancellation of
        the calling task still propagates; the row in flight then stays pending.
        """
        if self._draining:
            # Two drains would post the same row twice. The running drain sees the
            # flag and wakes again when it ends, so this wake is not lost.
            self._rerun = True
            return DrainReport(busy=True)
        self._draining = True
        try:
            return await self._drain_page()
        finally:
            self._draining = False
            if self._rerun:
                self._rerun = False
                self._schedule_wake(self._now())

    async def _drain_page(self) -> DrainReport:
        report = DrainReport()
        rows = self._outbox.list(self.page_size, self._cursor)
        start = self._now()
        # Call post for every due row of the page first, then await the answers in key
        # order: a host whose post starts its work when called (the daemon queues the
        # delivery at once) then delivers the whole page in one batch. For a host whose
        # post is a plain coroutine this is the same as posting one by one.
        calls: list[tuple[str, _Pending, Any]] = []
        for key, value in rows:
            row = _parse_row(value)
            if row is _RECEIPT:
                report.skipped_receipts += 1
                continue
            if not isinstance(row, _Pending):
                report.bad += 1
                continue
            if row.due > start:
                report.waiting += 1
                self._owe(row.due)
                continue
            try:
                call = self._post(row.mail)
            except Exception:  # noqa: BLE001 - a recipient's failure is its refusal alone
                call = None  # refused on the spot; retried later like any refusal
            calls.append((key, row, call))
        try:
            for i, (key, row, call) in enumerate(calls):
                try:
                    accepted = (await call) if call is not None else False
                except Exception:  # noqa: BLE001 - see the comment below
                    # A failing recipient must not stop the others; it is retried later.
                    accepted = False
                calls[i] = (key, row, None)
                now = self._now()
                if accepted is True:
                    self._outbox.put(key, _receipt_row(now))
                    report.posted += 1
                else:
                    due = now + self.backoff_ms(row.attempts)
                    self._outbox.put(key, _pending_row(row.mail, row.attempts + 1, due))
                    report.retried += 1
                    self._owe(due)
        finally:
            # Cancelled part-way: close what was never awaited (those rows stay pending).
            for _key, _row, call in calls:
                close = getattr(call, "close", None)
                if close is not None:
                    close()
        if len(rows) >= self.page_size:
            # Possibly more rows: continue from here at once, on a fresh wake, so one
            # drain call stays bounded.
            self._cursor = rows[-1][0]
            report.more = True
            self._schedule_wake(self._now())
        else:
            self._cursor = None
            earliest, self._pass_earliest = self._pass_earliest, None
            if earliest is not None:
                self._schedule_wake(earliest)
        return report
