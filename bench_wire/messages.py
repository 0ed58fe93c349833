"""Every request, response and event on the wire, as msgspec Structs, and their framing.

- Requests share one tagged base (`Request`, tag field `verb`) and decode through the
  `AnyRequest` union.
- Responses share `Response` (tag field `type`); each carries `id` (echoed from the
  request) and `ok`. Errors are `ErrorResponse` with `error: {code, message}`.
- Streams (`events` with follow, `session/tail`, `session/attach`) answer with frames of
  type `event` or `output` and end with one `end` frame (or an error frame).
- Events (the lines of events.jsonl) share `Event` (tag field `kind`); the daemon writes
  each as seq, ts, kind, then the fields, so the log can be searched by byte offset.

New fields always get defaults, so older peers keep decoding.

The framing (below the unions): one message per JSON line, with encoders and decoders
made once, the request decoder's precise error codes, and the typed codec of the client
protocol (`StructCodec`). The line buffer itself lives in `bench_wire.clientproto`
(stdlib only, so the CLI's fast path shares it).
"""

import functools
import operator
from typing import Any, cast, get_args

import msgspec

from bench_wire import verbs

# The types live in three modules by kind, each named once, where it is defined: every
# public name of those modules is re-exported here, so `from bench_wire import messages
# as m; m.X` stays the one way in, and each kind's members are found as the subclasses
# of its base (Request, Response, Event), in the order they are defined.
from bench_wire._events import *  # noqa: F403
from bench_wire._events import Event
from bench_wire._requests import *  # noqa: F403
from bench_wire._requests import Request
from bench_wire._responses import *  # noqa: F403
from bench_wire._responses import ErrorResponse, Id, Response
from bench_wire.errors import WireError

PROTOCOL_VERSION = 1


def _members(base: type) -> tuple[type, ...]:
    """The subclasses of `base` (theirs too), in the order they were defined: the
    decoders, the verb table and docs/protocol.md are all made from them."""
    found: list[type] = []
    sub: type
    for sub in base.__subclasses__():
        found += [sub, *_members(sub)]
    return tuple(found)


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


def _describe_validation(err: msgspec.ValidationError) -> str:
    return str(err).rstrip(".") + "."


def decode_request(line: bytes) -> Request:
    """Decode one request line or raise WireError with the precise code.

    Returns the request Struct. The error carries the request's id when it could be
    recovered, so the caller can echo it.
    """
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
    if not isinstance(verb, str) or verb not in _verbs():
        return WireError("unknown-verb", f"unknown verb {verb!r}; hello lists what is known")
    if isinstance(err, msgspec.ValidationError):
        return WireError("bad-request", _describe_validation(err))
    return WireError("bad-json", str(err))


def _too_deep() -> WireError:
    return WireError("bad-json", "the line nests JSON too deeply to be a request")


def _verbs() -> dict[str, type[Request]]:
    from bench_wire.messages import VERBS

    return VERBS


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
    """The client protocol's codec for typed clients: msgspec request Structs out,
    `AnyResponse` Structs in, each answer checked against its request's own answer
    types (`messages.ANSWERS`; see `bench_wire.clientproto`).

    `token`: a session's BENCH_TOKEN, sent with every request that carries none of its
    own (the CLI's and MCP's; the dashboard and the bridge are the operator's, and
    send none)."""

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

    def fits(self, frame: Response, expected: tuple[type[Response], ...]) -> bool:
        return isinstance(frame, expected)

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
