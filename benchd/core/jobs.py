"""Jobs and what they owe, as frozen values, with no I/O (docs/jobs.md): once settled,
every reply-to address is owed exactly one reply; a cancelled job owes none.
`benchd.runtime.jobhost` runs it; records are stored as JSON (`benchd.store.outbox`).
"""

import enum
import re
from collections.abc import Mapping

import msgspec

from bench_wire.errors import WireError
from benchd.core.frontmatter import scalar
from benchd.core.keys import reply_key as reply_key  # re-exported


class Outcome(enum.StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    # The spawn failed before the child ran: nothing was started, so nothing is owed.
    ABANDONED = "abandoned"


# Cancellation is deliberate, so it is quiet (no replies), and an abandoned job never
# ran (its spawner was told the spawn failed); every other ending is said as it is.
_QUIET = frozenset({Outcome.CANCELLED, Outcome.ABANDONED})


def reply_outcome(outcome: Outcome) -> str | None:
    """The outcome a reply reports (the job's own word), or None for no reply."""
    return None if outcome in _QUIET else str(outcome)


class Job(msgspec.Struct, frozen=True, kw_only=True):
    session: str  # the child's session id
    handle: str  # the child's handle: the replies are from it
    key: str  # the task mail's key; every reply key derives from it
    sender: str  # the spawner's handle (the task mail is from it)
    reply_to: tuple[str, ...]  # handles, or handle@node on another node
    deadline_ms: int | None = None  # wall-clock ms when it is ended, if it has one


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """One reply a settled job owes: to `reply_to[index]`, keyed by that index."""

    index: int
    to: str
    attempts: int = 0  # refusals so far
    due: int = 0  # wall-clock ms when it is tried next
    delivered: bool = False  # its receipt: never sent again


class JobRecord(msgspec.Struct, frozen=True, kw_only=True):
    job: Job
    content: str = ""  # the last `bench report`, "" if none
    task_id: str | None = None  # the task mail's id: the replies are in its thread
    subject: str | None = None  # the task mail's subject
    outcome: str | None = None  # None while it runs
    body: str = ""  # the replies' body, once settled
    replies: tuple[Reply, ...] = ()

    @property
    def running(self) -> bool:
        return self.outcome is None

    @property
    def owing(self) -> bool:
        """Running, or a reply not yet delivered: the record stays open."""
        return self.outcome is None or any(not r.delivered for r in self.replies)

    def reply_key(self, reply: Reply) -> str:
        return reply_key(self.job.key, reply.index)


_DETAIL_NAME = re.compile(r"[a-z][A-Za-z0-9]{0,31}")
_FIXED_FIELDS = frozenset({"outcome", "agentId", "sessionId"})


def _detail_lines(details: Mapping[str, str | int]) -> str:
    """Header lines after the fixed three: how the job ended (camelCase names; an int
    is written plain, a string as any other header value)."""
    lines = []
    for name, value in details.items():
        if not _DETAIL_NAME.fullmatch(name) or name in _FIXED_FIELDS:
            raise WireError(
                "bad-content", f"reply detail name {name!r} is not a new camelCase word"
            )
        text = str(value) if isinstance(value, int) else scalar(value)
        lines.append(f"{name}: {text}\n")
    return "".join(lines)


def reply_body(
    said: str,
    agent_id: str,
    session_id: str,
    content: str,
    details: Mapping[str, str | int] | None = None,
) -> str:
    """A reply's body: a small front-matter header (`outcome`: `said`, `agentId`,
    `sessionId`, then `details` such as `ended` and `exitCode`), a blank line, then
    `content`."""
    return (
        f"---\noutcome: {said}\nagentId: {scalar(agent_id)}\nsessionId: {scalar(session_id)}\n"
        f"{_detail_lines(details or {})}---\n\n{content}"
    )


def reply_subject(task_subject: str | None, task_key: str, outcome: str) -> str:
    """`Re: <task subject> (<outcome>)`, cut to the mailroom's 200 characters. A job made
    before replies were threaded has no stored subject: its key names it."""
    suffix = f" ({outcome})"
    return f"Re: {task_subject or task_key}"[: 200 - len(suffix)] + suffix


def settle(
    record: JobRecord,
    outcome: Outcome,
    content: str,
    details: Mapping[str, str | int],
    now: int,
) -> JobRecord:
    """The record of a job that settled now: its outcome and one pending reply per
    distinct reply-to address (the same address listed again gets one copy; keys keep
    their index). A quiet outcome owes nothing."""
    job = record.job
    said = reply_outcome(outcome)
    if said is None:
        return msgspec.structs.replace(record, outcome=str(outcome))
    body = reply_body(said, job.handle, job.session, content, details)
    first: dict[str, int] = {}  # each address at its first index, in index order
    for i, to in enumerate(job.reply_to):
        first.setdefault(to, i)
    replies = tuple(Reply(index=i, to=to, due=now) for to, i in first.items())
    return msgspec.structs.replace(record, outcome=said, body=body, replies=replies)


def due(record: JobRecord, now: int) -> list[Reply]:
    return [r for r in record.replies if not r.delivered and r.due <= now]


def backoff_ms(attempts: int, base_ms: int, max_ms: int = 300_000) -> int:
    """Delay before the next try after refusal number `attempts` (0-based): doubling
    from `base_ms`, at most `max_ms`."""
    if attempts >= 62:  # cap the exponent first: never a huge integer
        return max_ms
    return int(min(max_ms, base_ms * 2**attempts))


def attempted(record: JobRecord, accepted: Mapping[int, bool], now: int, base_ms: int) -> JobRecord:
    """The record after a try of the replies in `accepted` (by index): an accepted one is
    delivered (its receipt), a refused one is due again after its backoff."""

    def after(r: Reply) -> Reply:
        if r.index not in accepted or r.delivered:
            return r
        if accepted[r.index]:
            return msgspec.structs.replace(r, delivered=True)
        return msgspec.structs.replace(
            r, attempts=r.attempts + 1, due=now + backoff_ms(r.attempts, base_ms)
        )

    return msgspec.structs.replace(record, replies=tuple(after(r) for r in record.replies))
