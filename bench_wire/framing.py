"""JSON-lines framing: a bounded, I/O-free line buffer and encoders/decoders made once."""

import msgspec

from bench_wire.errors import WireError
from bench_wire.messages import AnyRequest, Request

# A frame must hold the largest body JSON-escaped (worst case 6 bytes per byte) plus fields.
DEFAULT_FRAME_BYTES = 2 * 1024 * 1024

encoder = msgspec.json.Encoder()
request_decoder = msgspec.json.Decoder(AnyRequest)


def encode_line(msg: msgspec.Struct) -> bytes:
    """One message as one `\\n`-terminated line."""
    return encoder.encode(msg) + b"\n"


class FrameTooLong(Exception):
    """A line grew past the cap before its newline arrived."""


class LineBuffer:
    """Splits a byte stream into lines of at most `max_line` bytes (newline excluded).

    Feed it whatever recv() returned; it returns the complete lines. It never holds more
    than `max_line` bytes of an unfinished line: past that it raises FrameTooLong, and
    the connection should be answered and closed.
    """

    def __init__(self, max_line: int = DEFAULT_FRAME_BYTES):
        self.max_line = max_line
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines: list[bytes] = []
        start = 0
        while True:
            nl = self._buf.find(b"\n", start)
            if nl < 0:
                break
            if nl - start > self.max_line:
                raise FrameTooLong()
            lines.append(bytes(self._buf[start:nl]))
            start = nl + 1
        del self._buf[:start]
        if len(self._buf) > self.max_line:
            raise FrameTooLong()
        return lines


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
