"""The events (the lines of events.jsonl), tagged by `kind`, and the words a job's ending
is said in (`OUTCOMES`, `REASONS`). Import them from `bench_wire.messages`."""

import msgspec


class Event(msgspec.Struct, tag_field="kind", kw_only=True):
    seq: int = 0
    ts: int = 0


class _SessionEvent(Event):
    """The fields of every event about one session (a group: no kind of its own)."""

    session: str
    handle: str


class DaemonStarted(Event, tag="daemon/started"):
    pid: int
    version: str
    recovered: bool = False


class DaemonStopped(Event, tag="daemon/stopped"):
    pid: int


class SessionSpawned(_SessionEvent, tag="session/spawned"):
    pid: int
    argv: list[str]
    job: bool = False


class SessionExited(_SessionEvent, tag="session/exited"):
    pid: int
    exit: int | None = None
    signal: int | None = None


class MailSent(Event, tag="mail/sent"):
    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    path: str
    key: str
    live: bool = False
    recovered: bool = False


class MailReadEvent(Event, tag="mail/read"):
    mail_id: str
    handle: str
    reader: str
    path: str


class MailVanished(Event, tag="mail/vanished"):
    """A message the index listed has no file (removed by hand): dropped from the index."""

    mail_id: str
    handle: str
    path: str


class IndexFailed(Event, tag="index/failed"):
    """The mail index (a cache of the files) could not be written or read. `action`:
    retry (the changes wait in memory), rebuild, set-aside, in-memory."""

    error: str
    action: str
    pending: int = 0
    failures: int = 0


class IndexRebuilt(Event, tag="index/rebuilt"):
    """The index was refilled from the mail files."""

    reason: str
    messages: int


class JournalDamaged(Event, tag="journal/damaged"):
    """Replay went on past a damaged stretch of the journal (its fields: docs/durability.md,
    "The journal"); shown by `bench status` until acknowledged (`--ack`)."""

    segment: str
    offset: int
    size: int
    held: str
    messages: list[str] = []
    lost: list[str] = []
    events: list[int] = []
    in_log: bool = True


class DiskLow(Event, tag="disk/low"):
    """Free space below the reserve: the journal's segments grow with their records."""

    free: int
    reserve: int


class LogRotated(Event, tag="log/rotated"):
    """events.jsonl reached `bound` and became events.1.jsonl: the new file's first line.
    The events up to `dropped` (0: none) went with the file before."""

    dropped: int
    kept_from: int
    bound: int


class AgentWoken(_SessionEvent, tag="agent/woken"):
    mail_id: str | None
    path: str | None
    sender: str | None = msgspec.field(default=None, name="from")
    digest: int = 0
    door: str | None = None  # "stop-hook": handed over by the agent's Stop hook, not typed


class AgentStateChanged(_SessionEvent, tag="agent/state"):
    """An agent's state changed, by its report or (a usage limit) its screen (`source`)."""

    state: str  # idle, working, blocked, limited, exited
    tool: str | None = None
    input: str | None = None
    until: int | None = None
    source: str = "report"


class AgentAnswered(_SessionEvent, tag="agent/answered"):
    """An approval was answered (`bench approve` / `bench deny`), or its wait ran out."""

    allow: bool
    by: str  # who answered: operator, an ancestor's handle, or "timeout"
    via: str  # hook or keys
    tool: str | None = None
    reason: str | None = None


class AgentReportLimited(_SessionEvent, tag="agent/report-limited"):
    """Hook reports refused over --agent-reports: one line per flood (docs/limits.md)."""

    limit: int
    count: int = 1


class EnterRetried(_SessionEvent, tag="wake/enter-retried"):
    """The screen did not change after Enter, so Enter was pressed again (never the text)."""

    mail_id: str | None
    attempt: int


class WakeCapped(_SessionEvent, tag="wake/capped"):
    mail_id: str
    path: str
    until: int | None = None  # wall ms when the recipient's next wake token is due


class JobSettled(_SessionEvent, tag="job/settled"):
    """A job ended: its outcome and reason in the words of `OUTCOMES` and `REASONS`."""

    key: str
    outcome: str
    replies: int
    recovered: bool = False
    reason: str | None = None  # why it failed or was interrupted (None: completed, cancelled)


# A job's ending in one vocabulary (docs/jobs.md's table), wherever it is shown.
OUTCOMES = ("completed", "failed", "interrupted", "cancelled")
REASONS = ("exit-code", "signal", "killed", "deadline", "daemon-stopped")

# Words earlier versions stored, and what they mean now.
_OLD = {"outcome_unknown": ("interrupted", "daemon-stopped")}


def current_outcome(
    outcome: str | None, reason: str | None = None
) -> tuple[str | None, str | None]:
    """(outcome, reason) in today's words, for a record of any version."""
    if outcome in _OLD:
        new, why = _OLD[outcome]
        return new, reason or why
    return outcome, reason


def upgrade_event(record: dict[str, object]) -> dict[str, object]:
    """A `job/settled` record from the log in today's words (others unchanged)."""
    if record.get("kind") != "job/settled" or record.get("outcome") not in _OLD:
        return record
    old, why = record.get("outcome"), record.get("reason")
    outcome, reason = current_outcome(str(old), why if isinstance(why, str) else None)
    return dict(record, outcome=outcome, reason=reason)


class JobDeadline(_SessionEvent, tag="job/deadline"):
    """A job's deadline passed: it is being ended (recovered: found past it at start)."""

    key: str
    deadline_ms: int  # the deadline, wall-clock ms
    recovered: bool = False


class JobStalled(_SessionEvent, tag="job/stalled"):
    """A job's child was idle for its stall-after time without a report; its reply-to
    addresses were mailed (`refused`: those the mailroom refused)."""

    idle_ms: int
    mailed: list[str] = []
    refused: list[str] = []


class JobActive(_SessionEvent, tag="job/active"):
    """A stalled job's child showed output again: the stall is over."""

    stalled_ms: int  # how long the stall lasted, from its job/stalled


class JobDelegated(Event, tag="job/delegated"):
    """A session started a job of its own: the parent, the child, who is owed its reply."""

    parent: str
    parent_handle: str
    child: str
    child_handle: str
    reply_to: list[str]
    depth: int


class JobLimited(_SessionEvent, tag="job/limited"):
    """Spawns refused by a delegation limit: one line per flood (docs/limits.md)."""

    code: str
    limit: str
    value: int
    count: int = 1


class JobReported(_SessionEvent, tag="job/reported"):
    bytes: int


class OutboxPosted(Event, tag="outbox/posted"):
    key: str
    to: str
    mail_id: str


class OutboxRetry(Event, tag="outbox/retry"):
    """A job's reply was refused (it waits in the outbox and is tried again later)."""

    key: str
    to: str
    reason: str
    code: str | None = None  # the refusal's code, e.g. mailbox-full


class BridgeQueued(Event, tag="bridge/queued"):
    """Mail to another node, accepted into the outbound queue (mail/@outbound/inbox)."""

    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    key: str
    path: str


class BridgeForwarded(Event, tag="bridge/forwarded"):
    """A queued message was acknowledged by JetStream (moved to mail/@outbound/read)."""

    mail_id: str
    to: str
    key: str


class BridgeDelivered(Event, tag="bridge/delivered"):
    """A message from another node was delivered here (its mail/sent is in the same batch)."""

    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    key: str
    origin: str
    origin_id: str = ""  # the message's id on its origin node (where receipts go back)


class BridgeReceipt(Event, tag="bridge/receipt"):
    """A receipt from node `node` for mail sent there (docs/nodes.md, "Receipts"); `at`:
    its wall ms, clamped between the message's queueing and the receipt's arrival."""

    mail_id: str
    node: str
    state: str
    at: int
    by: str = ""


class BridgeReceiptIgnored(Event, tag="bridge/receipt-ignored"):
    """A receipt from node `node` not recorded: `code` unknown-mail, wrong-node or
    bad-receipt (docs/nodes.md, "Receipts")."""

    node: str
    mail_id: str
    code: str
    reason: str


class LimitHit(Event, tag="limit/hit"):
    """A limit refused requests: one line per flood of one code and source, with the
    count of refusals it stands for (docs/limits.md)."""

    code: str  # rate-limited, mailbox-full, too-many-recipients or too-many-connections
    sender: str
    limit: int  # the limit in force
    mailbox: str | None = None  # mailbox-full: the full mailbox
    tree: str | None = None  # a tree's budget: the root's session id, and which budget
    budget: str | None = None
    count: int = 1  # the refusals this line stands for: since the source's last line


class BridgeBounced(Event, tag="bridge/bounced"):
    """A message refused on `node` went back to its sender (docs/nodes.md, "Bounces"):
    `mail_id` the original's where queued, the bounce's where delivered."""

    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    key: str
    node: str
    code: str
    reason: str


class BridgeSkipped(Event, tag="bridge/skipped"):
    """A directory entry the bridge did not use (malformed, over a cap): once per change."""

    code: str
    reason: str


class BridgeForgotten(Event, tag="bridge/forgotten"):
    """A node left the directory: mail to it is refused as unknown-node from now on."""

    node: str


class BridgeStopped(Event, tag="bridge/stopped"):
    """The bridge refused to run (e.g. node-name-taken); `bench status` shows it too."""

    code: str
    reason: str


class BridgeDisconnected(Event, tag="bridge/disconnected"):
    """The bridge lost its NATS connection (it reconnects on its own)."""


class BridgeReconnected(Event, tag="bridge/reconnected"):
    """The bridge has its NATS connection again, after `down_s` seconds."""

    down_s: float = 0.0


class BridgeRetry(Event, tag="bridge/retry"):
    """The bridge could not reach NATS (or publish) and will try again after `delay` s."""

    reason: str
    attempt: int
    delay: float


# ---------------------------------------------------------------- delivery states and waits


class AgentActive(_SessionEvent, tag="agent/active"):
    """After a wake, the recipient's screen changed (evidence it started work, not proof)."""

    mail_id: str | None


class WakeDeferred(_SessionEvent, tag="wake/deferred"):
    """A wake waits, once per wake (docs/reactor.md, "What the sender sees")."""

    mail_id: str | None
    reason: str  # operator-typing; blocked (its agent waits for an approval); parked (limited)
    until: int | None = None  # parked: the agent's reset time (wall ms), when known


class WaitOpened(Event, tag="wait/opened"):
    """A wait began: `handle` waits on `on` (None: anyone's mail) or on `job`'s session;
    one line per flood of the same wait (docs/limits.md)."""

    handle: str
    on: str | None = None
    job: str | None = None
    count: int = 1


class WaitRefused(Event, tag="wait/refused"):
    """A wait refused (would-deadlock, with the cycle, or too-many-waits): one line per
    flood of one code and caller (docs/limits.md)."""

    handle: str
    code: str
    cycle: list[str] = []
    limit: int = 0
    count: int = 1
