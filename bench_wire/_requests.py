"""The requests on the wire: the tagged base `Request` (tag field `verb`) and each verb's
Struct, with the Structs they carry. `bench_wire.messages` re-exports them all and holds
the `AnyRequest` union; import them from there.

Each request names its answer as its type parameter: `Hello(Request["HelloOk"])` is
answered with a `HelloOk`, a stream (`EventsRead`) with frames of that type up to its
end frame. The clients' `call` and `stream` are typed by it, and `messages.ANSWERS` reads
it at run time to check every answer (by the names in quotes). The Structs both sides
carry (an error's body, mail between nodes, a node's entry, a receipt) live with the
answers in `_responses`, below this module.
"""

from typing import TYPE_CHECKING, Generic, Literal, TypeVar

import msgspec

from bench_wire import verbs
from bench_wire._responses import ErrorBody, Id, NodeInfo, Receipt, RemoteMail

if TYPE_CHECKING:
    # A default (PEP 696) lets `Request` stand alone for "any request": Request[Response].
    from typing_extensions import TypeVar as DefaultedTypeVar

    from bench_wire._responses import (  # noqa: F401  (named in quotes below)
        AgentAnswerOk,
        AgentReportOk,
        AttachOk,
        BounceOk,
        BridgeReportOk,
        DeliverOk,
        EventFrame,
        FaultOk,
        ForwardOk,
        HelloOk,
        JobWaitOk,
        JournalAckOk,
        KillOk,
        ListOk,
        NodesOk,
        OutputFrame,
        PruneOk,
        PullOk,
        ReadOk,
        ReceiptsOk,
        ReceiptsPullOk,
        ReplyOk,
        ReportOk,
        Response,
        ScreenFrame,
        SearchOk,
        SendOk,
        SentListOk,
        SessionListOk,
        SpawnOk,
        StatusOk,
        StopOk,
        ThreadOk,
        TypeOk,
        WaitOk,
    )

    Answer = DefaultedTypeVar("Answer", bound="Response", default="Response", covariant=True)
else:
    Answer = TypeVar("Answer", covariant=True)


class Request(msgspec.Struct, Generic[Answer], tag_field="verb", kw_only=True, omit_defaults=True):
    id: Id = None
    # A session's secret (BENCH_TOKEN); absent for the operator. The daemon derives the
    # caller from it and from the socket's peer credentials, never from a claimed name.
    token: str | None = None


class Hello(Request["HelloOk"], tag=verbs.HELLO):
    pass


class Stop(Request["StopOk"], tag=verbs.STOP):
    pass


class MailSend(Request["SendOk"], tag=verbs.MAIL_SEND):
    to: str
    body: str = ""
    subject: str = ""
    key: str | None = None
    reply_to: list[str] = []
    in_reply_to: str | None = None


class MailList(Request["ListOk"], tag=verbs.MAIL_LIST):
    handle: str | None = None
    state: Literal["unread", "read", "all"] = "unread"
    limit: int | None = None
    cursor: str | None = None


class MailRead(Request["ReadOk"], tag=verbs.MAIL_READ):
    handle: str | None = None
    mail_id: str | None = None


class MailSearch(Request["SearchOk"], tag=verbs.MAIL_SEARCH):
    """Full text over subject and body; best matches first, snippets never bodies."""

    query: str
    handle: str | None = None  # whose mailbox (operator only; a session: its own)
    # Only mail from this address (`alice` or `alice@node2`).
    sender: str | None = msgspec.field(default=None, name="from")
    since: str | None = None  # an ISO-8601 UTC time: only mail sent at or after it
    limit: int | None = None


class MailThread(Request["ThreadOk"], tag=verbs.MAIL_THREAD):
    """The conversation a message belongs to (linked by in-reply-to), oldest first; one
    longer than `limit` is cut to the message's neighbourhood (`left_out` in the answer).

    `mail_id`: its id here, or its identity across nodes (<id>@<node>)."""

    mail_id: str
    limit: int | None = None  # default and maximum: caps.thread_max


class MailReply(Request["ReplyOk"], tag=verbs.MAIL_REPLY):
    """Answer a message: to its reply-to (else its sender), in-reply-to set, `Re:` subject.

    Recipients on other nodes (`carol@node2`) are answered across the bridge."""

    mail_id: str
    body: str = ""
    subject: str | None = None  # default: "Re: " + the message's subject
    key: str | None = None


class EventsRead(Request["EventFrame"], tag=verbs.EVENTS):
    since: int = 0
    kind: str | None = None  # a kind (mail/sent) or a prefix of kinds ending in / (job/)
    follow: bool = False
    limit: int | None = None


class JobMailSpec(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The task mail of a job spawn (`bench spawn --mail FILE --reply-to H`)."""

    body: str
    subject: str = ""
    key: str | None = None
    reply_to: list[str] = []


class Spawn(Request["SpawnOk"], tag=verbs.SESSION_SPAWN):
    argv: list[str]
    name: str | None = None
    cwd: str | None = None
    env: dict[str, str] = {}
    ready: str | None = None
    rows: int = 40
    cols: int = 120
    agent: str | None = None
    job: JobMailSpec | None = None
    # Seconds from the spawn until the session is ended (a job then replies interrupted,
    # reason deadline); None: no deadline.
    deadline: float | None = None
    # A job's stall time in seconds: idle that long without a report mails its reply-to
    # addresses. None: the daemon's --stall-after; 0: never.
    stall_after: float | None = None
    # False: run it outside the sandbox (`bench spawn --no-sandbox`; the operator's only).
    sandbox: bool = True
    # An adapter session's mid-turn door (`bench spawn --mid-turn`): mail is also handed
    # over after each tool call, as added context (a hook per tool call: opt-in).
    mid_turn: bool = False


class SessionList(Request["SessionListOk"], tag=verbs.SESSION_LIST):
    pass


class SessionKill(Request["KillOk"], tag=verbs.SESSION_KILL):
    handle: str
    cancel: bool = False
    tree: bool = False  # also its descendants, children first


class SessionPrune(Request["PruneOk"], tag=verbs.SESSION_PRUNE):
    """Forget exited sessions (their mailboxes stay); operator only."""


class SessionType(Request["TypeOk"], tag=verbs.SESSION_TYPE):
    handle: str
    text: str
    enter: bool = True


class SessionTail(Request["OutputFrame | ScreenFrame"], tag=verbs.SESSION_TAIL):
    handle: str
    follow: bool = False
    screen: bool = False
    lines: int | None = None  # only the last N lines of the scrollback (or screen); None: all


class SessionScreen(Request["ScreenFrame"], tag=verbs.SESSION_SCREEN):
    """The session's screen now, then (follow) each change, at most ~10 frames a second."""

    handle: str
    follow: bool = False


class SessionAttach(Request["AttachOk | OutputFrame"], tag=verbs.SESSION_ATTACH):
    handle: str
    rows: int | None = None
    cols: int | None = None


class SessionInput(Request["Response"], tag=verbs.SESSION_INPUT):
    """Keystrokes from an attached operator (only valid after session/attach)."""

    data: str  # base64


class SessionResize(Request["Response"], tag=verbs.SESSION_RESIZE):
    rows: int
    cols: int


class SessionDetach(Request["Response"], tag=verbs.SESSION_DETACH):
    pass


class JobReport(Request["ReportOk"], tag=verbs.JOB_REPORT):
    content: str


class AgentReport(Request["AgentReportOk"], tag=verbs.AGENT_REPORT):
    """A hook of the caller's own agent (`bench hook EVENT`): the event's name (bench's,
    benchd.core.agentstate.EVENTS) and the JSON the agent gave its hook, as it gave it.
    The daemon places it by the caller: a session reports only about itself."""

    event: str
    payload: str = ""


class AgentAnswer(Request["AgentAnswerOk"], tag=verbs.AGENT_ANSWER):
    """`bench approve|deny HANDLE`: answer the approval the session's agent waits for."""

    handle: str
    allow: bool
    reason: str | None = None


class JournalAck(Request["JournalAckOk"], tag=verbs.JOURNAL_ACK):
    """Acknowledge the journal damage `hello` reports (operator only): it is no longer
    shown; the journal/damaged events stay in the log."""


class DebugFault(Request["FaultOk"], tag=verbs.DEBUG_FAULT):
    """Test-only: arm a fault at a named point (refused unless benchd --test-hooks)."""

    point: Literal["deliver", "eventlog", "journal", "post"]
    errno: str = "ENOSPC"
    count: int = 1


class BridgePull(Request["PullOk"], tag=verbs.BRIDGE_PULL):
    """The bridge: the oldest messages queued for other nodes (waits up to `wait` s for one)."""

    limit: int = 64
    wait: float = 0.0
    # Only messages after this id: the bridge's messages published but not yet marked.
    after: str | None = None


class BridgeForward(Request["ForwardOk"], tag=verbs.BRIDGE_FORWARDED):
    """The bridge: these queued messages were published and acknowledged by JetStream."""

    mail_ids: list[str]


class BridgeDeliver(Request["DeliverOk"], tag=verbs.BRIDGE_DELIVER):
    """The bridge: deliver messages that arrived from other nodes into local mailboxes.

    `origin` is the node the message came from, as the bridge saw it."""

    messages: list[RemoteMail]
    origin: str = ""


class BridgeReport(Request["BridgeReportOk"], tag=verbs.BRIDGE_REPORT):
    """The bridge's heartbeat: connected to NATS or not, the directory it sees, a retry.

    `nodes` is the whole directory as just read (nodes not in it are forgotten), or None
    when it was not read this time. `skipped` are directory entries refused (once per
    revision); `error` is why the bridge stopped (e.g. node-name-taken)."""

    connected: bool
    nodes: list[NodeInfo] | None = None
    stale_after: float = 15.0
    forget_after: float = 7 * 86400.0
    skipped: list[ErrorBody] = []
    error: ErrorBody | None = None
    retry: str | None = None
    attempt: int = 0
    delay: float = 0.0
    # "disconnected" or "reconnected": the NATS connection changed just now (down_s:
    # how long it was down), said at once rather than at the next heartbeat.
    link: str | None = None
    down_s: float = 0.0


class BridgeBounce(Request["BounceOk"], tag=verbs.BRIDGE_BOUNCE):
    """The bridge: return a message that came from `origin` to its sender, from
    postmaster@<this node>, for `error` (e.g. expired: it waited too long in the stream)."""

    message: RemoteMail
    origin: str
    error: ErrorBody


class BridgeReceiptsPull(Request["ReceiptsPullOk"], tag=verbs.BRIDGE_RECEIPTS_PULL):
    """The bridge: receipts for other nodes' mail delivered or read here, to send back
    (waits up to `wait` s for one). What is pulled is the bridge's to send."""

    limit: int = 256
    wait: float = 0.0


class BridgeReceipts(Request["ReceiptsOk"], tag=verbs.BRIDGE_RECEIPTS):
    """The bridge: receipts that came from node `origin` for mail sent from here."""

    receipts: list[Receipt]
    origin: str


class NodesRead(Request["NodesOk"], tag=verbs.BRIDGE_NODES):
    pass


# ---------------------------------------------------------------- delivery states and waits
# `mail/sent-list`, `mail/status`, `mail/wait` and `job/wait`: a sent message's states, and waits.


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
