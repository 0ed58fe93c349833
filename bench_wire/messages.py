"""Every request, response and event on the wire, as msgspec Structs.

- Requests share one tagged base (`Request`, tag field `verb`) and decode through the
  `AnyRequest` union.
- Responses share `Response` (tag field `type`); each carries `id` (echoed from the
  request) and `ok`. Errors are `ErrorResponse` with `error: {code, message}`.
- Streams (`events` with follow, `session/tail`, `session/attach`) answer with frames of
  type `event` or `output` and end with one `end` frame (or an error frame).
- Events (the lines of events.jsonl) share `Event` (tag field `kind`); the daemon writes
  each as seq, ts, kind, then the fields, so the log can be searched by byte offset.

New fields always get defaults, so older peers keep decoding.
"""

from typing import Any, Literal, cast

import msgspec

PROTOCOL_VERSION = 1

Id = int | str | None


# ---------------------------------------------------------------- requests


class Request(msgspec.Struct, tag_field="verb", kw_only=True, omit_defaults=True):
    id: Id = None
    # A session's secret (BENCH_TOKEN); absent for the operator. The daemon derives the
    # caller from it and from the socket's peer credentials, never from a claimed name.
    token: str | None = None


class Hello(Request, tag="hello"):
    pass


class Stop(Request, tag="stop"):
    pass


class MailSend(Request, tag="mail/send"):
    to: str
    body: str = ""
    subject: str = ""
    key: str | None = None
    reply_to: list[str] = []
    in_reply_to: str | None = None


class MailList(Request, tag="mail/list"):
    handle: str | None = None
    state: Literal["unread", "read", "all"] = "unread"
    limit: int | None = None
    cursor: str | None = None


class MailRead(Request, tag="mail/read"):
    handle: str | None = None
    mail_id: str | None = None


class MailSearch(Request, tag="mail/search"):
    """Full text over subject and body; best matches first, snippets never bodies."""

    query: str
    handle: str | None = None  # whose mailbox (operator only; a session: its own)
    # Only mail from this address (`alice` or `alice@node2`).
    sender: str | None = msgspec.field(default=None, name="from")
    since: str | None = None  # an ISO-8601 UTC time: only mail sent at or after it
    limit: int | None = None


class MailThread(Request, tag="mail/thread"):
    """The conversation a message belongs to (linked by in-reply-to), oldest first; one
    longer than `limit` is cut to the message's neighbourhood (`left_out` in the answer).

    `mail_id`: its id here, or its identity across nodes (<id>@<node>)."""

    mail_id: str
    limit: int | None = None  # default and maximum: caps.thread_max


class MailReply(Request, tag="mail/reply"):
    """Answer a message: to its reply-to (else its sender), in-reply-to set, `Re:` subject.

    Recipients on other nodes (`carol@node2`) are answered across the bridge."""

    mail_id: str
    body: str = ""
    subject: str | None = None  # default: "Re: " + the message's subject
    key: str | None = None


class EventsRead(Request, tag="events"):
    since: int = 0
    kind: str | None = None
    follow: bool = False
    limit: int | None = None


class JobMailSpec(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The task mail of a job spawn (`bench spawn --mail FILE --reply-to H`)."""

    body: str
    subject: str = ""
    key: str | None = None
    reply_to: list[str] = []


class Spawn(Request, tag="session/spawn"):
    argv: list[str]
    name: str | None = None
    cwd: str | None = None
    env: dict[str, str] = {}
    ready: str | None = None
    rows: int = 40
    cols: int = 120
    agent: str | None = None
    job: JobMailSpec | None = None


class SessionList(Request, tag="session/list"):
    pass


class SessionKill(Request, tag="session/kill"):
    handle: str
    cancel: bool = False
    tree: bool = False  # also its descendants, children first


class SessionPrune(Request, tag="session/prune"):
    """Forget exited sessions (their mailboxes stay); operator only."""


class SessionType(Request, tag="session/type"):
    handle: str
    text: str
    enter: bool = True


class SessionTail(Request, tag="session/tail"):
    handle: str
    follow: bool = False
    screen: bool = False


class SessionScreen(Request, tag="session/screen"):
    """The session's screen now, then (follow) each change, at most ~10 frames a second."""

    handle: str
    follow: bool = False


class SessionAttach(Request, tag="session/attach"):
    handle: str
    rows: int | None = None
    cols: int | None = None


class SessionInput(Request, tag="session/input"):
    """Keystrokes from an attached operator (only valid after session/attach)."""

    data: str  # base64


class SessionResize(Request, tag="session/resize"):
    rows: int
    cols: int


class SessionDetach(Request, tag="session/detach"):
    pass


class JobReport(Request, tag="job/report"):
    content: str


class JournalAck(Request, tag="journal/ack"):
    """Acknowledge the journal damage `hello` reports (operator only): it is no longer
    shown; the journal/damaged events stay in the log."""


class DebugFault(Request, tag="debug/fault"):
    """Test-only: arm a fault at a named point (refused unless benchd --test-hooks)."""

    point: Literal["deliver", "eventlog", "journal", "post"]
    errno: str = "ENOSPC"
    count: int = 1


class RemoteMail(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One message between nodes: what the bridge publishes to NATS and hands the far
    daemon. Addresses are full (`alice@node1`); the key is the sender's idempotency key."""

    mail_id: str
    sender: str = msgspec.field(name="from")
    to: str
    key: str
    body: str = ""
    subject: str = ""
    date: str = ""
    reply_to: list[str] = []
    in_reply_to: str | None = None


class NodeInfo(msgspec.Struct, kw_only=True):
    """A node of the directory: its name, when its bridge last beat (ms), its live handles."""

    node: str
    seen_ms: int
    handles: list[str] = []


class BridgePull(Request, tag="bridge/pull"):
    """The bridge: the oldest messages queued for other nodes (waits up to `wait` s for one)."""

    limit: int = 64
    wait: float = 0.0
    # Only messages after this id: the bridge's messages published but not yet marked.
    after: str | None = None


class BridgeForward(Request, tag="bridge/forwarded"):
    """The bridge: these queued messages were published and acknowledged by JetStream."""

    mail_ids: list[str]


class BridgeDeliver(Request, tag="bridge/deliver"):
    """The bridge: deliver messages that arrived from other nodes into local mailboxes.

    `origin` is the node the message came from, as the bridge saw it."""

    messages: list[RemoteMail]
    origin: str = ""


class BridgeReport(Request, tag="bridge/report"):
    """The bridge's heartbeat: connected to NATS or not, the directory it sees, a retry.

    `nodes` is the whole directory as just read (nodes not in it are forgotten), or None
    when it was not read this time. `skipped` are directory entries refused (once per
    revision); `error` is why the bridge stopped (e.g. node-name-taken)."""

    connected: bool
    nodes: list[NodeInfo] | None = None
    stale_after: float = 15.0
    forget_after: float = 7 * 86400.0
    skipped: list["ErrorBody"] = []
    error: "ErrorBody | None" = None
    retry: str | None = None
    attempt: int = 0
    delay: float = 0.0


class BridgeBounce(Request, tag="bridge/bounce"):
    """The bridge: return a message that came from `origin` to its sender, from
    postmaster@<this node>, for `error` (e.g. expired: it waited too long in the stream)."""

    message: RemoteMail
    origin: str
    error: "ErrorBody"


class NodesRead(Request, tag="bridge/nodes"):
    pass


AnyRequest = (
    Hello
    | Stop
    | MailSend
    | MailList
    | MailRead
    | MailSearch
    | MailThread
    | MailReply
    | EventsRead
    | Spawn
    | SessionList
    | SessionKill
    | SessionPrune
    | SessionType
    | SessionTail
    | SessionScreen
    | SessionAttach
    | SessionInput
    | SessionResize
    | SessionDetach
    | JobReport
    | JournalAck
    | DebugFault
    | BridgePull
    | BridgeForward
    | BridgeDeliver
    | BridgeReport
    | BridgeBounce
    | NodesRead
)

REQUEST_TYPES: tuple[type[Request], ...] = AnyRequest.__args__
# Every request type has a string tag (its verb).
VERBS: dict[str, type[Request]] = {cast(str, t.__struct_config__.tag): t for t in REQUEST_TYPES}


# ---------------------------------------------------------------- responses


class Response(msgspec.Struct, tag_field="type", kw_only=True):
    id: Id = None
    ok: bool = True


class ErrorBody(msgspec.Struct, frozen=True, omit_defaults=True):
    code: str
    message: str
    retry_after: float | None = None  # rate-limited: seconds until the request would fit


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
    # Delegation: what one session may start (benchd.core.delegation).
    max_children: int = 4
    max_depth: int = 3
    spawn_rate: int = 30
    # Exited sessions remembered on disk: how many, and how much of each one's output.
    exited_kept: int = 200
    kept_scrollback_bytes: int = 65536
    # The sender limits (benchd's options of the same names; docs/limits.md).
    send_burst: int = 0
    send_rate: float = 0.0
    operator_send_burst: int = 0
    operator_send_rate: float = 0.0
    mailbox_messages: int = 0
    mailbox_bytes: int = 0
    reply_to_max: int = 0
    thread_max: int = 0


class ReactorSettings(msgspec.Struct, kw_only=True):
    idle_gate: float
    paste_settle: float
    wake_burst: int
    wake_refill: float
    enter_retries: int
    enter_check: float = 0.5
    retry_base: float = 1.0


class IndexHealth(msgspec.Struct, kw_only=True):
    """The mail index's health. state: ok; retrying (commits fail: `pending` changes wait
    in memory, reads still see them); in-memory (no file could be used; rebuilt from the
    files at the next start)."""

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
    """The state dir's filesystem. full: the last write found no room (sends answer
    disk-full until one succeeds); reserve: free bytes the journal leaves untouched
    when it preallocates its segments (grown with their records below it)."""

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
    journal_damage: list["JournalDamaged"] = []  # found at starts, until acknowledged


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
    # Its identity on every node: <id>@<node>, the id the node it was sent from gave it.
    origin: str = ""


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
    outcome: str | None = None  # a settled job's: completed, failed, cancelled, ...


class SpawnOk(Response, tag="session/spawn"):
    session: str
    handle: str
    pid: int
    mail_id: str | None = None


class SessionListOk(Response, tag="session/list"):
    sessions: list[SessionInfo]


class KillOk(Response, tag="session/kill"):
    session: str
    handle: str
    ended: list[str] = []  # with tree: the session ids ended, in order (children first)


class PruneOk(Response, tag="session/prune"):
    forgotten: int


class TypeOk(Response, tag="session/type"):
    session: str
    bytes: int


class ReportOk(Response, tag="job/report"):
    session: str
    bytes: int


class FaultOk(Response, tag="debug/fault"):
    pass


class AttachOk(Response, tag="session/attach"):
    session: str
    handle: str
    rows: int
    cols: int


class OutputFrame(Response, tag="output"):
    """A piece of a session's output, base64 (ptys carry bytes, not text)."""

    data: str


class ScreenFrame(Response, tag="screen"):
    """The session's screen as text, as a person would see it now."""

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
    """The last frame of a stream."""

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


class BridgeReportOk(Response, tag="bridge/report"):
    node: str
    handles: list[str]


class NodesOk(Response, tag="bridge/nodes"):
    node: str
    nodes: list[NodeInfo]
    bridge: BridgeInfo


AnyResponse = (
    ErrorResponse
    | HelloOk
    | StopOk
    | SendOk
    | ListOk
    | ReadOk
    | SearchOk
    | ThreadOk
    | ReplyOk
    | SpawnOk
    | SessionListOk
    | KillOk
    | PruneOk
    | TypeOk
    | ReportOk
    | FaultOk
    | JournalAckOk
    | AttachOk
    | OutputFrame
    | ScreenFrame
    | EventFrame
    | EndFrame
    | PullOk
    | ForwardOk
    | DeliverOk
    | BridgeReportOk
    | BounceOk
    | NodesOk
)
RESPONSE_TYPES = AnyResponse.__args__


# ---------------------------------------------------------------- events


class Event(msgspec.Struct, tag_field="kind", kw_only=True):
    seq: int = 0
    ts: int = 0


class DaemonStarted(Event, tag="daemon/started"):
    pid: int
    version: str
    recovered: bool = False


class DaemonStopped(Event, tag="daemon/stopped"):
    pid: int


class SessionSpawned(Event, tag="session/spawned"):
    session: str
    handle: str
    pid: int
    argv: list[str]
    job: bool = False


class SessionExited(Event, tag="session/exited"):
    session: str
    handle: str
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
    """Free space below the reserve (`--disk-reserve`): the journal's segments were not
    preallocated and grow with their records instead."""

    free: int
    reserve: int


class AgentWoken(Event, tag="agent/woken"):
    session: str
    handle: str
    mail_id: str | None
    path: str | None
    sender: str | None = msgspec.field(default=None, name="from")
    digest: int = 0


class EnterRetried(Event, tag="wake/enter-retried"):
    """The screen did not change after Enter, so Enter was pressed again (never the text)."""

    session: str
    handle: str
    mail_id: str | None
    attempt: int


class WakeCapped(Event, tag="wake/capped"):
    session: str
    handle: str
    mail_id: str
    path: str


class JobSettled(Event, tag="job/settled"):
    session: str
    handle: str
    key: str
    outcome: str
    replies: int
    recovered: bool = False


class JobDelegated(Event, tag="job/delegated"):
    """A session started a job of its own: the parent, the child, who is owed its reply."""

    parent: str
    parent_handle: str
    child: str
    child_handle: str
    reply_to: list[str]
    depth: int


class JobLimited(Event, tag="job/limited"):
    """A session's spawn was refused by a delegation limit (children, depth or rate)."""

    session: str
    handle: str
    code: str
    limit: str
    value: int


class JobReported(Event, tag="job/reported"):
    session: str
    handle: str
    bytes: int


class OutboxPosted(Event, tag="outbox/posted"):
    key: str
    to: str
    mail_id: str


class OutboxRetry(Event, tag="outbox/retry"):
    key: str
    to: str
    reason: str


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


class LimitHit(Event, tag="limit/hit"):
    """A sender limit refused a request: the first of a run of refusals (docs/limits.md)."""

    code: str  # rate-limited, mailbox-full or too-many-recipients
    sender: str
    limit: int  # the limit in force
    mailbox: str | None = None  # mailbox-full: the full mailbox


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


class BridgeRetry(Event, tag="bridge/retry"):
    """The bridge could not reach NATS (or publish) and will try again after `delay` s."""

    reason: str
    attempt: int
    delay: float


AnyEvent = (
    DaemonStarted
    | DaemonStopped
    | SessionSpawned
    | SessionExited
    | MailSent
    | MailReadEvent
    | MailVanished
    | IndexFailed
    | IndexRebuilt
    | JournalDamaged
    | DiskLow
    | AgentWoken
    | EnterRetried
    | WakeCapped
    | JobSettled
    | JobDelegated
    | JobLimited
    | JobReported
    | OutboxPosted
    | OutboxRetry
    | BridgeQueued
    | BridgeForwarded
    | BridgeDelivered
    | BridgeRetry
    | LimitHit
    | BridgeBounced
    | BridgeSkipped
    | BridgeStopped
    | BridgeForgotten
)
EVENT_TYPES = AnyEvent.__args__
EVENT_KINDS = tuple(t.__struct_config__.tag for t in EVENT_TYPES)
