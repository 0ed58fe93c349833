"""The events (the lines of events.jsonl): the tagged base `Event` (tag field `kind`) and
each kind's Struct, with the words a job's ending is said in (`OUTCOMES`, `REASONS`). `bench_wire.messages` re-exports them all and holds the `AnyEvent`
union; import them from there."""

import msgspec


class Event(msgspec.Struct, tag_field="kind", kw_only=True):
    seq: int = 0
    ts: int = 0


class _SessionEvent(Event):
    """The fields of every event about one session, first: its id and handle. A group of
    fields, not a kind: `messages._members` leaves it out."""

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
    """A message the index listed has no file any more (removed by hand): it was dropped
    from the index."""

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
    """Replay found a damaged stretch of the journal and went on past it. `messages`:
    the messages it named (handle/mail_id); `lost`: those whose file is on disk nowhere
    (their only record was the damaged one); `events`: the seqs of the events it named,
    `in_log`: whether events.jsonl still holds them. Shown by `bench status` until
    acknowledged (`bench status --ack`)."""

    segment: str
    offset: int
    size: int
    held: str
    messages: list[str] = []
    lost: list[str] = []
    events: list[int] = []
    in_log: bool = True


class DiskLow(Event, tag="disk/low"):
    """Free space below the reserve (64 MiB): the journal's segments were not
    preallocated and grow with their records instead."""

    free: int
    reserve: int


class LogRotated(Event, tag="log/rotated"):
    """The event log reached its bound (`--event-log-bytes`, `bound`): events.jsonl became
    events.1.jsonl and this is the new file's first line. The events up to `dropped`
    (0: none) went with the file before; readers see from `kept_from` on."""

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
    """An adapter session's agent changed state, by its own report (`source` report) or,
    for a usage limit no report gave, by its screen (`source` screen: evidence)."""

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
    """A session sent hook reports faster than --agent-reports allows: one line per
    flood of refusals (--flood-interval), `count` the refusals it stands for."""

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
    """A job ended: its outcome and reason in the words of `OUTCOMES` and `REASONS` below."""

    key: str
    outcome: str
    replies: int
    recovered: bool = False
    reason: str | None = None  # why it failed or was interrupted (None: completed, cancelled)


# A job's ending in one vocabulary, its outcome and the reason for it (docs/jobs.md's
# table): the same words in `bench ps`, `job/settled`, the dashboard and the reply mail's
# header. An earlier version's `outcome_unknown` is read by `current_outcome`.
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
    """A job's deadline passed: it is being ended (recovered: found at start, already
    past it, its session gone with the previous daemon)."""

    key: str
    deadline_ms: int  # the deadline, wall-clock ms
    recovered: bool = False


class JobStalled(_SessionEvent, tag="job/stalled"):
    """A job's child showed no output for its stall-after time and has not reported;
    one mail went to each reply-to address (mailed; refused: those the mailroom refused)."""

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
    """A session's spawn was refused by a delegation limit (children, depth or rate):
    one line per flood, with the count of refusals it stands for (docs/limits.md)."""

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
    """Node `node` said what became of mail sent from here to it: `delivered` into the
    recipient's inbox there, or `read` there (`by` a read or a wake). `at` is its time
    (wall ms, no earlier than the message was queued, no later than the receipt came)."""

    mail_id: str
    node: str
    state: str
    at: int
    by: str = ""


class BridgeReceiptIgnored(Event, tag="bridge/receipt-ignored"):
    """A receipt from node `node` was not recorded: `code` unknown-mail (no message
    with that id was sent from here), wrong-node (it was sent to another node) or
    bad-receipt (malformed)."""

    node: str
    mail_id: str
    code: str
    reason: str


class LimitHit(Event, tag="limit/hit"):
    """A limit refused a request: one line per flood of refusals of the same code and
    sender (or mailbox, or tree budget), at most one per --flood-interval seconds, with
    the count of refusals it stands for (docs/limits.md)."""

    code: str  # rate-limited, mailbox-full, too-many-recipients or too-many-connections
    sender: str
    limit: int  # the limit in force
    mailbox: str | None = None  # mailbox-full: the full mailbox
    # A budget of a tree of sessions (a session and the jobs below it): the root's
    # session id, and which budget (sends, spawns, bytes, mailboxes, connections).
    tree: str | None = None
    budget: str | None = None
    count: int = 1  # the refusals this line stands for: since the source's last line


class BridgeBounced(Event, tag="bridge/bounced"):
    """A message was refused on `node` (or waited there too long) and returned to its
    sender as mail from postmaster@<node>: on the refusing node when the bounce is queued
    (`mail_id` the original's id), on the sender's when it is delivered (the bounce's)."""

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
    """A node left the directory (purged, or not seen for --forget-after): mail to it is
    refused as unknown-node from now on."""

    node: str


class BridgeStopped(Event, tag="bridge/stopped"):
    """The bridge refused to run (e.g. node-name-taken); `bench status` shows it too."""

    code: str
    reason: str


class BridgeDisconnected(Event, tag="bridge/disconnected"):
    """The bridge lost its NATS connection (it reconnects on its own); mail to other
    nodes waits in the outbound queue meanwhile."""


class BridgeReconnected(Event, tag="bridge/reconnected"):
    """The bridge has its NATS connection again, after `down_s` seconds."""

    down_s: float = 0.0


class BridgeRetry(Event, tag="bridge/retry"):
    """The bridge could not reach NATS (or publish) and will try again after `delay` s."""

    reason: str
    attempt: int
    delay: float


# ---------------------------------------------------------------- delivery states and waits
# The events the states are made from that no other verb logs (`agent/active`,
# `wake/deferred`), and the waits'.


class AgentActive(_SessionEvent, tag="agent/active"):
    """After a wake, the recipient's screen changed (evidence it started work, not proof)."""

    mail_id: str | None


class WakeDeferred(_SessionEvent, tag="wake/deferred"):
    """A wake waits: `reason` operator-typing (someone typed into the session lately).
    Logged once per wake."""

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
