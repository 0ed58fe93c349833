"""JSON-lines framing with msgspec: encoders/decoders made once, the request decoder's
error codes, and the typed codec of the client protocol (`StructCodec`). The line
buffer itself lives in `bench_wire.lines` (stdlib only, so the CLI's fast path shares it).
"""

import msgspec

from bench_wire import verbs
from bench_wire.errors import WireError
from bench_wire.lines import FrameTooLong as FrameTooLong
from bench_wire.lines import LineBuffer as LineBuffer
from bench_wire.messages import (
    ANSWERS,
    AnyRequest,
    AnyResponse,
    ErrorResponse,
    Id,
    Request,
    Response,
)

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
