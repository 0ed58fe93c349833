"""The responses on the wire, tagged by `type`, and the Structs they (and some requests)
carry. Import them from `bench_wire.messages`."""

from typing import Any, Literal

import msgspec

from bench_wire._events import JournalDamaged

Id = int | str | None


class ErrorBody(msgspec.Struct, frozen=True, omit_defaults=True):
    code: str
    message: str
    retry_after: float | None = None  # rate-limited: seconds until the request would fit


class RemoteMail(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One message between nodes, as published to NATS; addresses are full (`alice@node1`)."""

    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    key: str
    body: str = ""
    subject: str = ""
    date: str = ""
    reply_to: list[str] = []
    in_reply_to: str | None = None
    # Its JetStream dedup id, random so no other node can claim it first ("": mail queued
    # before nonces).
    nonce: str = ""


class NodeInfo(msgspec.Struct, kw_only=True):
    """A node of the directory: its name, when its bridge last beat (ms), its live handles."""

    node: str
    seen_ms: int
    handles: list[str] = []


class Receipt(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of a message on the node it was sent to (docs/nodes.md, "Receipts"):
    `mail_id` is its id on the sender's node; `node` the node the receipt goes to
    (bridge/receipts-pull only: on NATS the subject names both ends)."""

    mail_id: str
    state: str
    at: int = 0
    by: str = ""
    node: str = ""


class Response(msgspec.Struct, tag_field="type", kw_only=True):
    id: Id = None
    ok: bool = True


class _SessionAnswer(Response):
    """The fields of every answer about one session (a group: no type of its own)."""

    session: str
    handle: str


class ErrorResponse(Response, tag="error"):
    ok: bool = False
    error: ErrorBody = ErrorBody("internal", "")


class Caps(msgspec.Struct, kw_only=True):
    frame_bytes: int
    body_bytes: int
    subject_chars: int
    list_cap: int
    list_max: int
    connections: int
    scrollback_bytes: int
    max_children: int = 4
    max_depth: int = 3
    spawn_rate: int = 30
    # Exited sessions remembered on disk: how many, and how much of each one's output.
    exited_kept: int = 200
    kept_scrollback_bytes: int = 65536
    # The options of the same names (bench_wire.config, docs/limits.md).
    send_burst: int = 0
    send_rate: float = 0.0
    operator_send_burst: int = 0
    operator_send_rate: float = 0.0
    mailbox_messages: int = 0
    mailbox_bytes: int = 0
    reply_to_max: int = 0
    thread_max: int = 0
    tree_bytes: int = 0
    tree_mailboxes: int = 0
    tree_connections: int = 0
    # Whether sessions are sandboxed ("on"/"off"), and when off, why, in one line.
    isolation: str = "off"
    isolation_note: str = ""


class ReactorSettings(msgspec.Struct, kw_only=True):
    idle_gate: float
    paste_settle: float
    wake_burst: int
    wake_refill: float
    enter_retries: int
    enter_check: float = 0.5
    # Not the reactor's (a refused job reply's first retry delay): moving it would change
    # the protocol.
    retry_base: float = 1.0


class IndexHealth(msgspec.Struct, kw_only=True):
    """The mail index's health: `state` ok, retrying (commits fail: `pending` changes wait
    in memory) or in-memory (no file could be used; docs/durability.md)."""

    state: str = "ok"
    pending: int = 0
    failures: int = 0
    error: str | None = None
    rebuilds: int = 0


class BridgeInfo(msgspec.Struct, kw_only=True):
    """The bridge as the daemon last heard from it, and the outbound queue."""

    connected: bool = False
    seen_ms: int | None = None
    queued: int = 0
    error: ErrorBody | None = None  # why the bridge last stopped, until it runs again


class DiskHealth(msgspec.Struct, kw_only=True):
    """The state dir's filesystem (docs/durability.md, "A full disk"): `full` when the
    last write found no room; `reserve` the free bytes preallocation leaves untouched."""

    free: int = 0
    full: bool = False
    reserve: int = 0


class HelloOk(Response, tag="hello"):
    version: str
    protocol: int
    pid: int
    bench_dir: str
    caller: str
    caps: Caps
    reactor: ReactorSettings
    sessions: int = 0
    mailboxes: int = 0
    index: IndexHealth = msgspec.field(default_factory=IndexHealth)
    test_hooks: bool = False
    verbs: list[str] = []
    node: str = ""
    bridge: BridgeInfo | None = None
    disk: DiskHealth | None = None
    journal_damage: list[JournalDamaged] = []  # found at starts, until acknowledged
    # The newest seq answered so far: `events` since last_seq - N reads the last N events.
    last_seq: int = 0


class JournalAckOk(Response, tag="journal/ack"):
    acknowledged: int


class StopOk(Response, tag="stop"):
    pass


class SendOk(Response, tag="mail/send"):
    mail_id: str
    path: str
    to: str
    key: str
    live: bool
    duplicate: bool = False
    note: str | None = None
    new_mailbox: bool = False  # no mailbox and no live session had this handle before
    # Its in-reply-to names a message the sender did not receive: delivered, but no reply
    # to it (the sentence says so; None otherwise).
    not_a_reply: str | None = None


class MessageMeta(msgspec.Struct, kw_only=True):
    mail_id: str
    sender: str = msgspec.field(name="from")
    subject: str
    date: str
    state: Literal["unread", "read"]
    size: int
    in_reply_to: str | None = None  # the message this one answers (threads)


class ListOk(Response, tag="mail/list"):
    handle: str
    messages: list[MessageMeta]
    total: int
    cap: int
    truncated: bool
    cursor: str | None = None


class ReadOk(Response, tag="mail/read"):
    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    subject: str
    date: str
    body: str
    path: str
    key: str
    retired: bool
    reply_to: list[str] = []
    in_reply_to: str | None = None


class SearchHit(msgspec.Struct, kw_only=True):
    mail_id: str
    handle: str  # whose mailbox holds it
    sender: str = msgspec.field(name="from")
    subject: str
    date: str
    state: Literal["unread", "read"]
    size: int
    path: str
    snippet: str  # a few words of the body around the match, matches in [brackets]
    to: str = ""  # the recipient as addressed (handle@node for mail to another node)


class SearchOk(Response, tag="mail/search"):
    hits: list[SearchHit]
    truncated: bool = False


class ThreadMessage(msgspec.Struct, kw_only=True):
    mail_id: str
    handle: str  # the recipient, whose mailbox holds it
    sender: str = msgspec.field(name="from")
    subject: str
    date: str
    state: Literal["unread", "read"]
    path: str
    body: str
    in_reply_to: str | None = None  # the message it answers: an id here, or <id>@<node>
    to: str = ""  # the recipient as addressed (handle@node for mail to another node)
    origin: str = ""  # its identity on every node: <id>@<node> (docs/nodes.md)


class ThreadLeftOut(msgspec.Struct, kw_only=True):
    """What a cut thread did not show, and where to ask to see it."""

    ancestors: int  # messages between the root and the oldest ancestor shown
    replies: bool  # replies (or other branches) beyond those shown
    above: str | None = None  # `mail thread` of this id shows the messages above
    below: str | None = None  # `mail thread` of this id shows the replies below


class ThreadOk(Response, tag="mail/thread"):
    mail_id: str
    messages: list[ThreadMessage]
    truncated: bool = False
    cap: int = 0
    left_out: ThreadLeftOut | None = None


class ReplyOk(Response, tag="mail/reply"):
    """One send per recipient (the message's reply-to addresses, else its sender)."""

    in_reply_to: str  # what the replies' in-reply-to says: the message's identity
    sent: list[SendOk]


class Launch(msgspec.Struct, kw_only=True):
    """How a session was started, as `bench restart` starts it again; of its environment
    only the names (the values may be secrets)."""

    argv: list[str]
    cwd: str
    agent: str | None = None
    ready: str | None = None
    rows: int = 40
    cols: int = 120
    sandbox: bool = True
    env_keys: list[str] = []


class AgentInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What an agent's hooks said (benchd.core.agentstate), and what its screen shows."""

    adapter: str  # claude; "self": no adapter, the program runs `bench hook` by itself
    state: str | None = None  # idle, working, blocked, limited, exited; None: not reported yet
    since: int | None = None  # wall ms
    tool: str | None = None  # blocked: the tool waiting
    input: str | None = None  # blocked: its input (JSON text, cut)
    until: int | None = None  # limited: the reset time, wall ms, when known
    source: str | None = None  # "report", or "screen" when only the screen said so (evidence)
    screen: str | None = None  # what the screen shows beside it (evidence): e.g. "limit"


class SessionInfo(msgspec.Struct, kw_only=True):
    session: str
    handle: str
    pid: int
    state: Literal["running", "exited"]
    idle_ms: int | None
    exit: int | None = None
    signal: int | None = None
    argv: list[str] = []
    job: bool = False
    reply_to: list[str] = []  # a job's: the addresses owed a reply when it ends
    parent: str | None = None  # the session id of the session that spawned it (a job)
    parent_handle: str | None = None
    outcome: str | None = None  # a settled job's: completed, failed, interrupted, cancelled
    reason: str | None = None  # why it failed or was interrupted (`OUTCOMES`, bench_wire._events)
    deadline_left_ms: int | None = None  # a live session with a deadline: the time left
    stalled: bool = False  # a live job's child is stalled (idle past stall-after, no report)
    launch: Launch | None = None  # how it was started (None: a daemon before restart)

    agent: AgentInfo | None = None  # an adapter session's own state, once it reported


class SpawnOk(_SessionAnswer, tag="session/spawn"):
    pid: int
    mail_id: str | None = None


class SessionListOk(Response, tag="session/list"):
    sessions: list[SessionInfo]


class KillOk(_SessionAnswer, tag="session/kill"):
    ended: list[str] = []  # with tree: the session ids ended, in order (children first)


class PruneOk(Response, tag="session/prune"):
    forgotten: int


class TypeOk(Response, tag="session/type"):
    session: str
    bytes: int


class ReportOk(Response, tag="job/report"):
    session: str
    bytes: int


class AgentReportOk(Response, tag="agent/report"):
    """`output`: what the hook prints for its agent to read (a Stop hook's next
    instruction, a PermissionRequest's decision), or None: nothing."""

    state: str
    output: str | None = None


class AgentAnswerOk(_SessionAnswer, tag="agent/answer"):
    tool: str | None
    via: str  # "hook" (the agent's own mechanism) or "keys" (typed into its dialog)


class FaultOk(Response, tag="debug/fault"):
    pass


class AttachOk(_SessionAnswer, tag="session/attach"):
    rows: int
    cols: int


class OutputFrame(Response, tag="output"):
    data: str  # base64: ptys carry bytes, not text


class ScreenFrame(Response, tag="screen"):
    lines: list[str]
    cursor_row: int = 0
    cursor_col: int = 0
    rows: int = 0  # (session/screen) the model's size
    cols: int = 0
    # (session/screen) per line, the non-default runs: [start, length, fg, bg, flags]
    styles: list[list[list[int | str]]] = []


class EventFrame(Response, tag="event"):
    event: dict[str, Any]


class EndFrame(Response, tag="end"):
    reason: str = "done"
    exit: int | None = None


class PullOk(Response, tag="bridge/pull"):
    messages: list[RemoteMail]


class ForwardOk(Response, tag="bridge/forwarded"):
    forwarded: int


class Delivered(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The answer for one message of a bridge/deliver, in order: its local id, or an error."""

    mail_id: str | None = None
    duplicate: bool = False
    error: ErrorBody | None = None


class DeliverOk(Response, tag="bridge/deliver"):
    results: list[Delivered]


class BounceOk(Response, tag="bridge/bounce"):
    mail_id: str | None = None  # the bounce, queued for the sender's node
    error: ErrorBody | None = None


class ReceiptsPullOk(Response, tag="bridge/receipts-pull"):
    receipts: list[Receipt]


class ReceiptsOk(Response, tag="bridge/receipts"):
    recorded: int  # new states of messages sent from here to that node (repeats: not)
    ignored: int  # receipts about no such message (each said by bridge/receipt-ignored)


class BridgeReportOk(Response, tag="bridge/report"):
    node: str
    handles: list[str]


class NodesOk(Response, tag="bridge/nodes"):
    node: str
    nodes: list[NodeInfo]
    bridge: BridgeInfo


# ---------------------------------------------------------------- delivery states and waits


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


class StateMark(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One state a message reached, and when (ISO-8601 UTC, ms)."""

    state: str  # one of STATES
    at: str
    reason: str | None = None  # not-woken: why (docs/cli.md lists the reasons)
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


class JobWaitOk(_SessionAnswer, tag="job/wait"):
    outcome: str  # completed, failed, cancelled, abandoned, outcome_unknown
    reply: str  # the content the job owed (its last report, or how its session ended)
    reason: str | None = None  # why it failed or was interrupted (`OUTCOMES`, bench_wire._events)
    path: str | None = None  # the reply mail in the waiter's mailbox, once delivered there
