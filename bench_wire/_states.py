"""Delivery states and waits on the wire: the verbs `mail/sent-list`, `mail/status`,
`mail/wait` and `job/wait`, their answers, and the events the states are made from that
no other verb logs (`agent/active`, `wake/deferred`). `bench_wire.messages` re-exports
them all and holds the unions; import them from there."""

import msgspec

from bench_wire import verbs
from bench_wire._events import Event
from bench_wire._requests import Request
from bench_wire._responses import ReadOk, Response

# The states a message moves through, in the order a listing ranks them (docs/cli.md).
STATES = (
    "queued",
    "delivered",
    "not-woken",
    "woken",
    "read",
    "active",
    "replied",
)
# Why a wake was not typed (the `reason` of a not-woken state).
NOT_WOKEN_REASONS = (
    "no-live-session",
    "capped",
    "operator-typing",
    "read-first",
    "blocked",
    "parked",
)


# ---------------------------------------------------------------- requests


class MailSentList(Request["SentListOk"], tag=verbs.MAIL_SENT_LIST):
    """The caller's sent mail with its state, newest first. `sender`: whose (operator only;
    a session sees the mail it sent)."""

    to: str | None = None
    state: str | None = None  # one of STATES: only mail whose state it is now
    limit: int | None = None
    sender: str | None = msgspec.field(default=None, name="from")


class MailStatus(Request["StatusOk"], tag=verbs.MAIL_STATUS):
    """One message's states with their times (its sender, or the operator)."""

    mail_id: str


class MailWait(Request["WaitOk"], tag=verbs.MAIL_WAIT):
    """Block until mail that matches arrives in the caller's mailbox, then read it (which
    retires it), or answer `timeout` after `timeout` seconds. `sender`: only mail from
    this address; `reply_to`: only a reply to this message (in-reply-to naming it)."""

    sender: str | None = msgspec.field(default=None, name="from")
    reply_to: str | None = None
    timeout: float = 300.0


class JobWait(Request["JobWaitOk"], tag=verbs.JOB_WAIT):
    """Block until the job of a session (by handle or id) settles; answer its outcome and
    its reply, or `timeout`."""

    session: str
    timeout: float = 300.0


# ---------------------------------------------------------------- answers


class StateMark(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One state a message reached, and when (ISO-8601 UTC, ms)."""

    state: str  # one of STATES
    at: str
    reason: str | None = None  # not-woken: one of NOT_WOKEN_REASONS
    until: str | None = None  # not-woken, capped: when the recipient's next wake token is due
    by: str | None = None  # read: "read" (the recipient read it) or "wake" (the wake retired it)
    reader: str | None = None  # read by a read: who read it
    reply: str | None = None  # replied: the id of the reply
    node: str | None = None  # a receipt from another node: that node


class SentMail(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A sent message as `mail sent` lists it: its newest state and that state's time."""

    mail_id: str
    to: str
    date: str
    state: str
    at: str
    reason: str | None = None
    subject: str = ""  # "" also where the index no longer holds it (mail to another node)


class SentListOk(Response, tag="mail/sent-list"):
    sender: str = msgspec.field(name="from")
    messages: list[SentMail]
    truncated: bool = False


class StatusOk(Response, tag="mail/status"):
    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    state: str  # the newest (as `mail sent` shows it)
    states: list[StateMark]


class WaitOk(ReadOk, tag="mail/wait"):
    """The message that ended the wait, as `mail/read` answers it (and read as it is)."""


class JobWaitOk(Response, tag="job/wait"):
    session: str
    handle: str
    outcome: str  # completed, failed, cancelled, abandoned, outcome_unknown
    reply: str  # the content the job owed (its last report, or how its session ended)
    reason: str | None = None  # why it failed or was interrupted (bench_wire.outcomes)
    path: str | None = None  # the reply mail in the waiter's mailbox, once delivered there


# ---------------------------------------------------------------- events


class AgentActive(Event, tag="agent/active"):
    """After a wake, the recipient's screen changed (evidence it started work, not proof)."""

    session: str
    handle: str
    mail_id: str | None


class WakeDeferred(Event, tag="wake/deferred"):
    """A wake waits: `reason` operator-typing (someone typed into the session lately).
    Logged once per wake."""

    session: str
    handle: str
    mail_id: str | None
    reason: str  # operator-typing; blocked (its agent waits for an approval); parked (limited)
    until: int | None = None  # parked: the agent's reset time (wall ms), when known


class WaitOpened(Event, tag="wait/opened"):
    """A wait began: `handle` waits on `on` (None: on anyone's mail); `job` the session
    whose job it waits for. One line per flood of the same wait (a loop of short waits),
    with the count of waits it stands for (docs/limits.md)."""

    handle: str
    on: str | None = None
    job: str | None = None
    count: int = 1


class WaitRefused(Event, tag="wait/refused"):
    """A wait was refused: `code` would-deadlock (with the cycle) or too-many-waits. One
    line per flood of the same code and caller, with the count of refusals it stands for
    (docs/limits.md)."""

    handle: str
    code: str
    cycle: list[str] = []
    limit: int = 0
    count: int = 1
