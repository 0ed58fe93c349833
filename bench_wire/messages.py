"""Every request, response and event on the wire, as msgspec Structs, and their framing
(docs/protocol.md is made from them). New fields always get defaults, so older peers
keep decoding. Each request names its answer as its type parameter (ARCHITECTURE.md,
"One typed client").
"""

import functools
import operator
import sys
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, get_args

import msgspec

from bench_wire import verbs

# The answers and the events live in their own modules: re-exported here, so `m.X` is
# the one way in (and the names in quotes below resolve).
from bench_wire._events import *  # noqa: F403
from bench_wire._events import Event
from bench_wire._responses import *  # noqa: F403
from bench_wire._responses import (
    ErrorBody,
    ErrorResponse,
    Id,
    NodeInfo,
    Receipt,
    RemoteMail,
    Response,
)
from bench_wire.errors import WireError

if TYPE_CHECKING:
    # A default (PEP 696) lets `Request` stand alone for "any request": Request[Response].
    from typing_extensions import TypeVar as DefaultedTypeVar

    Answer = DefaultedTypeVar("Answer", bound="Response", default="Response", covariant=True)
else:
    Answer = TypeVar("Answer", covariant=True)


class Request(msgspec.Struct, Generic[Answer], tag_field="verb", kw_only=True, omit_defaults=True):
    id: Id = None
    token: str | None = None  # a session's BENCH_TOKEN (docs/protocol.md, "Requests")


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
    query: str
    handle: str | None = None  # whose mailbox (operator only; a session: its own)
    # Only mail from this address (`alice` or `alice@node2`).
    sender: str | None = msgspec.field(default=None, name="from")
    since: str | None = None  # an ISO-8601 UTC time: only mail sent at or after it
    limit: int | None = None


class MailThread(Request["ThreadOk"], tag=verbs.MAIL_THREAD):
    """The conversation a message belongs to (by its id here or its identity, <id>@<node>);
    one longer than `limit` is cut to the message's neighbourhood (`left_out`)."""

    mail_id: str
    limit: int | None = None  # default and maximum: caps.thread_max


class MailReply(Request["ReplyOk"], tag=verbs.MAIL_REPLY):
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
    # `bench spawn`'s options of the same names (docs/cli.md, docs/jobs.md).
    deadline: float | None = None  # seconds; None: none
    stall_after: float | None = None  # seconds; None: the daemon's --stall-after; 0: never
    sandbox: bool = True
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
    handle: str
    follow: bool = False


class SessionAttach(Request["AttachOk | OutputFrame"], tag=verbs.SESSION_ATTACH):
    handle: str
    rows: int | None = None
    cols: int | None = None


class SessionInput(Request["Response"], tag=verbs.SESSION_INPUT):
    data: str  # base64


class SessionResize(Request["Response"], tag=verbs.SESSION_RESIZE):
    rows: int
    cols: int


class SessionDetach(Request["Response"], tag=verbs.SESSION_DETACH):
    pass


class JobReport(Request["ReportOk"], tag=verbs.JOB_REPORT):
    content: str


class AgentReport(Request["AgentReportOk"], tag=verbs.AGENT_REPORT):
    """A hook of the caller's own agent (`bench hook EVENT`, docs/agents.md): the event and
    the JSON the agent gave its hook. A session reports only about itself."""

    event: str
    payload: str = ""


class AgentAnswer(Request["AgentAnswerOk"], tag=verbs.AGENT_ANSWER):
    """`bench approve|deny HANDLE`: answer the approval the session's agent waits for."""

    handle: str
    allow: bool
    reason: str | None = None


class JournalAck(Request["JournalAckOk"], tag=verbs.JOURNAL_ACK):
    """Acknowledge the journal damage `hello` reports (operator only; the events stay)."""


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
    """The bridge: deliver messages from node `origin` (as the bridge saw it) here."""

    messages: list[RemoteMail]
    origin: str = ""


class BridgeReport(Request["BridgeReportOk"], tag=verbs.BRIDGE_REPORT):
    """The bridge's heartbeat: connected to NATS or not, the directory it sees, a retry.
    `nodes` is the whole directory as just read (None: not read this time); `error` why
    the bridge stopped."""

    connected: bool
    nodes: list[NodeInfo] | None = None
    stale_after: float = 15.0
    forget_after: float = 7 * 86400.0
    skipped: list[ErrorBody] = []
    error: ErrorBody | None = None
    retry: str | None = None
    attempt: int = 0
    delay: float = 0.0
    # "disconnected" or "reconnected" just now (down_s: how long it was down).
    link: str | None = None
    down_s: float = 0.0


class BridgeBounce(Request["BounceOk"], tag=verbs.BRIDGE_BOUNCE):
    """The bridge: return a message from `origin` to its sender (docs/nodes.md, "Bounces")."""

    message: RemoteMail
    origin: str
    error: ErrorBody


class BridgeReceiptsPull(Request["ReceiptsPullOk"], tag=verbs.BRIDGE_RECEIPTS_PULL):
    """The bridge: receipts to send back for other nodes' mail (waits up to `wait` s)."""

    limit: int = 256
    wait: float = 0.0


class BridgeReceipts(Request["ReceiptsOk"], tag=verbs.BRIDGE_RECEIPTS):
    """The bridge: receipts that came from node `origin` for mail sent from here."""

    receipts: list[Receipt]
    origin: str


class NodesRead(Request["NodesOk"], tag=verbs.BRIDGE_NODES):
    pass


# ---------------------------------------------------------------- delivery states and waits


class MailSentList(Request["SentListOk"], tag=verbs.MAIL_SENT_LIST):
    """The caller's sent mail with its state, newest first (`sender`: whose; operator only)."""

    to: str | None = None
    state: str | None = None  # one of STATES: only mail whose state it is now
    limit: int | None = None
    sender: str | None = msgspec.field(default=None, name="from")


class MailStatus(Request["StatusOk"], tag=verbs.MAIL_STATUS):
    """One message's states with their times (its sender, or the operator)."""

    mail_id: str


class MailWait(Request["WaitOk"], tag=verbs.MAIL_WAIT):
    """Block until matching mail arrives in the caller's mailbox, then read it, or answer
    `timeout`. `reply_to`: only a reply to this message."""

    sender: str | None = msgspec.field(default=None, name="from")
    reply_to: str | None = None
    timeout: float = 300.0


class JobWait(Request["JobWaitOk"], tag=verbs.JOB_WAIT):
    """Block until a session's job settles; its outcome and reply, or `timeout`."""

    session: str
    timeout: float = 300.0


PROTOCOL_VERSION = 1


def _members(base: type) -> tuple[type, ...]:
    """The types below `base`, each followed by its own, in the order they were defined.
    A `_Name` below `base` is a group of fields its types share, no type itself."""
    found: list[type] = []
    for sub in sorted(_below(base), key=_defined):
        found += [sub, *_members(sub)]
    return tuple(found)


def _below(base: type) -> list[type]:
    """`base`'s subclasses, each `_Name` group's own in its place."""
    found: list[type] = []
    sub: type
    for sub in base.__subclasses__():
        found += _below(sub) if sub.__name__.startswith("_") else [sub]
    return found


def _defined(t: type) -> int:
    return list(vars(sys.modules[t.__module__])).index(t.__name__)


def _union(types: tuple[type, ...]) -> Any:
    """`A | B | ...` of the types, for a decoder (msgspec takes a union of tagged Structs)."""
    return functools.reduce(operator.or_, types)


REQUEST_TYPES = cast(tuple[type[Request], ...], _members(Request))
RESPONSE_TYPES = cast(tuple[type[Response], ...], _members(Response))
EVENT_TYPES = cast(tuple[type[Event], ...], _members(Event))
AnyRequest = _union(REQUEST_TYPES)
AnyResponse = _union(RESPONSE_TYPES)
AnyEvent = _union(EVENT_TYPES)
# Every request type has a string tag (its verb).
VERBS: dict[str, type[Request]] = {cast(str, t.__struct_config__.tag): t for t in REQUEST_TYPES}


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

EVENT_KINDS: tuple[str, ...] = tuple(cast(str, t.__struct_config__.tag) for t in EVENT_TYPES)


# A frame must hold the largest body JSON-escaped (worst case 6 bytes per byte) plus fields.
DEFAULT_FRAME_BYTES = 2 * 1024 * 1024

encoder = msgspec.json.Encoder()
request_decoder: msgspec.json.Decoder[Request] = msgspec.json.Decoder(AnyRequest)


def encode_line(msg: msgspec.Struct) -> bytes:
    """One message as one `\\n`-terminated line."""
    return encoder.encode(msg) + b"\n"


def decode_request(line: bytes) -> Request:
    """Decode one request line or raise WireError with the precise code."""
    try:
        return request_decoder.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        raise _classify(line, err) from None
    except RecursionError:
        raise _too_deep() from None


def _classify(line: bytes, err: Exception) -> WireError:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return WireError("bad-utf8", "the line is not valid UTF-8")
    try:
        raw = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return WireError("bad-json", f"the line is not valid JSON ({err})")
    except RecursionError:
        return _too_deep()
    if not isinstance(raw, dict):
        return WireError("not-object", 'a request must be a JSON object, e.g. {"verb": "hello"}')
    verb = raw.get("verb")
    if verb is None:
        return WireError("bad-request", 'the request has no "verb" field')
    if not isinstance(verb, str) or verb not in VERBS:
        return WireError("unknown-verb", f"unknown verb {verb!r}; hello lists what is known")
    if isinstance(err, msgspec.ValidationError):
        return WireError("bad-request", str(err).rstrip(".") + ".")
    return WireError("bad-json", str(err))


def _too_deep() -> WireError:
    return WireError("bad-json", "the line nests JSON too deeply to be a request")


def request_id_of(line: bytes) -> int | str | None:
    """Best effort: the `id` of a line that failed to decode, to echo in the error."""
    try:
        raw = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if isinstance(raw, dict):
        rid = raw.get("id")
        if isinstance(rid, (int, str)) and not isinstance(rid, bool):
            if isinstance(rid, int) and abs(rid) > 2**63:
                return None
            return rid
    return None


class StructCodec:
    """The client protocol's codec for typed clients (`bench_wire.clientproto`): Structs
    out and in, each answer checked against `ANSWERS`. `token`: a session's BENCH_TOKEN,
    sent with every request that carries none of its own."""

    def __init__(self, token: str | None = None) -> None:
        self._decoder: msgspec.json.Decoder[Response] = msgspec.json.Decoder(AnyResponse)
        self.token = token or None

    def encode(self, req: Request, rid: int) -> tuple[Id, bytes]:
        if req.id is None or (req.token is None and self.token is not None):
            # A copy: the caller's Struct may be sent again, on another connection.
            req = msgspec.structs.replace(
                req, id=rid if req.id is None else req.id, token=req.token or self.token
            )
        return req.id, encoder.encode(req) + b"\n"

    def streams(self, req: Request) -> bool:
        return req.__struct_config__.tag in verbs.STREAMS

    def expects(self, req: Request) -> tuple[type[Response], ...]:
        return ANSWERS[type(req)]

    def decode(self, line: bytes) -> Response:
        try:
            frame: Response = self._decoder.decode(line)
        except msgspec.DecodeError as err:
            raise ValueError(f"the daemon's answer did not decode: {err}") from None
        return frame

    def head(self, frame: Response) -> tuple[Id, str | None]:
        tag = frame.__struct_config__.tag
        return frame.id, tag if isinstance(tag, str) else None

    def error(self, frame: Response) -> tuple[str, str, float | None] | None:
        if not isinstance(frame, ErrorResponse):
            return None
        return frame.error.code, frame.error.message, frame.error.retry_after
