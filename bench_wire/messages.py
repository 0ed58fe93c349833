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

from typing import cast, get_args

# The types live in three modules by kind; every name is re-exported here (`X as X`: an
# explicit re-export), so `from bench_wire import messages as m; m.X` stays the one way
# in. isort would split each `as` import into a statement of its own.
# isort: off
from bench_wire._requests import (
    ErrorBody as ErrorBody,
    AgentAnswer as AgentAnswer,
    AgentReport as AgentReport,
    JournalAck as JournalAck,
    BridgeBounce as BridgeBounce,
    BridgeDeliver as BridgeDeliver,
    BridgeForward as BridgeForward,
    BridgePull as BridgePull,
    BridgeReport as BridgeReport,
    BridgeReceipts as BridgeReceipts,
    BridgeReceiptsPull as BridgeReceiptsPull,
    Receipt as Receipt,
    DebugFault as DebugFault,
    EventsRead as EventsRead,
    Hello as Hello,
    Id as Id,
    JobMailSpec as JobMailSpec,
    JobReport as JobReport,
    MailList as MailList,
    MailRead as MailRead,
    MailReply as MailReply,
    MailSearch as MailSearch,
    MailSend as MailSend,
    MailThread as MailThread,
    NodeInfo as NodeInfo,
    NodesRead as NodesRead,
    RemoteMail as RemoteMail,
    Request as Request,
    SessionAttach as SessionAttach,
    SessionDetach as SessionDetach,
    SessionInput as SessionInput,
    SessionKill as SessionKill,
    SessionList as SessionList,
    SessionPrune as SessionPrune,
    SessionResize as SessionResize,
    SessionScreen as SessionScreen,
    SessionTail as SessionTail,
    SessionType as SessionType,
    Spawn as Spawn,
    Stop as Stop,
)
from bench_wire._responses import (
    DiskHealth as DiskHealth,
    AgentAnswerOk as AgentAnswerOk,
    AgentInfo as AgentInfo,
    AgentReportOk as AgentReportOk,
    JournalAckOk as JournalAckOk,
    BounceOk as BounceOk,
    ReceiptsPullOk as ReceiptsPullOk,
    ReceiptsOk as ReceiptsOk,
    AttachOk as AttachOk,
    BridgeInfo as BridgeInfo,
    BridgeReportOk as BridgeReportOk,
    Caps as Caps,
    DeliverOk as DeliverOk,
    Delivered as Delivered,
    EndFrame as EndFrame,
    ErrorResponse as ErrorResponse,
    EventFrame as EventFrame,
    FaultOk as FaultOk,
    ForwardOk as ForwardOk,
    HelloOk as HelloOk,
    IndexHealth as IndexHealth,
    KillOk as KillOk,
    ListOk as ListOk,
    MessageMeta as MessageMeta,
    NodesOk as NodesOk,
    OutputFrame as OutputFrame,
    PruneOk as PruneOk,
    PullOk as PullOk,
    ReactorSettings as ReactorSettings,
    ReadOk as ReadOk,
    ReplyOk as ReplyOk,
    ReportOk as ReportOk,
    Response as Response,
    ScreenFrame as ScreenFrame,
    SearchHit as SearchHit,
    SearchOk as SearchOk,
    SendOk as SendOk,
    SessionInfo as SessionInfo,
    SessionListOk as SessionListOk,
    SpawnOk as SpawnOk,
    StopOk as StopOk,
    ThreadLeftOut as ThreadLeftOut,
    ThreadMessage as ThreadMessage,
    ThreadOk as ThreadOk,
    TypeOk as TypeOk,
)
from bench_wire._events import (
    JournalDamaged as JournalDamaged,
    DiskLow as DiskLow,
    BridgeBounced as BridgeBounced,
    BridgeSkipped as BridgeSkipped,
    BridgeForgotten as BridgeForgotten,
    BridgeStopped as BridgeStopped,
    AgentWoken as AgentWoken,
    AgentStateChanged as AgentStateChanged,
    AgentAnswered as AgentAnswered,
    AgentReportLimited as AgentReportLimited,
    BridgeDelivered as BridgeDelivered,
    BridgeReceipt as BridgeReceipt,
    BridgeReceiptIgnored as BridgeReceiptIgnored,
    BridgeForwarded as BridgeForwarded,
    BridgeQueued as BridgeQueued,
    BridgeRetry as BridgeRetry,
    BridgeDisconnected as BridgeDisconnected,
    BridgeReconnected as BridgeReconnected,
    DaemonStarted as DaemonStarted,
    DaemonStopped as DaemonStopped,
    EnterRetried as EnterRetried,
    Event as Event,
    IndexFailed as IndexFailed,
    IndexRebuilt as IndexRebuilt,
    JobDelegated as JobDelegated,
    JobLimited as JobLimited,
    JobReported as JobReported,
    JobSettled as JobSettled,
    JobDeadline as JobDeadline,
    JobStalled as JobStalled,
    JobActive as JobActive,
    LimitHit as LimitHit,
    MailReadEvent as MailReadEvent,
    MailSent as MailSent,
    MailVanished as MailVanished,
    OutboxPosted as OutboxPosted,
    OutboxRetry as OutboxRetry,
    SessionExited as SessionExited,
    SessionSpawned as SessionSpawned,
    WakeCapped as WakeCapped,
)
from bench_wire._states import (
    NOT_WOKEN_REASONS as NOT_WOKEN_REASONS,
    STATES as STATES,
    AgentActive as AgentActive,
    JobWait as JobWait,
    JobWaitOk as JobWaitOk,
    MailSentList as MailSentList,
    MailStatus as MailStatus,
    MailWait as MailWait,
    SentListOk as SentListOk,
    SentMail as SentMail,
    StateMark as StateMark,
    StatusOk as StatusOk,
    WaitOk as WaitOk,
    WaitOpened as WaitOpened,
    WaitRefused as WaitRefused,
    WakeDeferred as WakeDeferred,
)
# isort: on

PROTOCOL_VERSION = 1

# Each union lists every type of its kind: the decoders, the verb table and
# docs/protocol.md are all made from them.

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
    | AgentReport
    | AgentAnswer
    | JournalAck
    | DebugFault
    | BridgePull
    | BridgeForward
    | BridgeDeliver
    | BridgeReport
    | BridgeBounce
    | BridgeReceiptsPull
    | BridgeReceipts
    | NodesRead
    | MailSentList
    | MailStatus
    | MailWait
    | JobWait
)

REQUEST_TYPES: tuple[type[Request], ...] = AnyRequest.__args__
# Every request type has a string tag (its verb).
VERBS: dict[str, type[Request]] = {cast(str, t.__struct_config__.tag): t for t in REQUEST_TYPES}

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
    | AgentReportOk
    | AgentAnswerOk
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
    | ReceiptsPullOk
    | ReceiptsOk
    | NodesOk
    | SentListOk
    | StatusOk
    | WaitOk
    | JobWaitOk
)
RESPONSE_TYPES = AnyResponse.__args__


def _answer_types(t: type[Request]) -> tuple[type[Response], ...]:
    # Each request's type parameter names its answer types (`Request["A | B"]`).
    (ref,) = get_args(t.__orig_bases__[0])  # type: ignore[attr-defined]
    names = ref.__forward_arg__.split("|")
    found: tuple[type[Response], ...] = tuple(globals()[n.strip()] for n in names)
    return found


# Request type -> the answer types its frames may have (besides an error frame and, for a
# stream, its end frame): the typed client checks every answer against it.
ANSWERS: dict[type[Request], tuple[type[Response], ...]] = {
    t: _answer_types(t) for t in REQUEST_TYPES
}

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
    | AgentStateChanged
    | AgentAnswered
    | AgentReportLimited
    | EnterRetried
    | WakeCapped
    | JobSettled
    | JobDeadline
    | JobStalled
    | JobActive
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
    | BridgeDisconnected
    | BridgeReconnected
    | AgentActive
    | WakeDeferred
    | WaitOpened
    | WaitRefused
    | BridgeReceipt
    | BridgeReceiptIgnored
)
EVENT_TYPES = AnyEvent.__args__
EVENT_KINDS = tuple(t.__struct_config__.tag for t in EVENT_TYPES)
