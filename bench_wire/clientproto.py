"""The client side of the wire protocol, sans I/O: one state machine for every client
(ARCHITECTURE.md, "One typed client"); a `Codec` spells the requests and answers
(`client.JSON`: plain dicts; `messages.StructCodec`: Structs). The daemon's connections
split lines with `LineBuffer` too.

Stdlib only, and no `typing` at run time: the CLI's fast path imports this module
(tests/unit/test_imports.py).
"""

from bench_wire.errors import Disconnected, WireError

TYPE_CHECKING = False  # the type checker's alone (mypy reads it as true): no `typing` import
if TYPE_CHECKING:
    from typing import Any, Protocol

    Id = int | str | None

    class Codec(Protocol):
        """How one kind of client spells requests and answers:

        - `encode`: the request as one newline-terminated line carrying `rid` as its id,
          unless it carries an id of its own; and the id it goes out with.
        - `decode`: one answer line as a frame; ValueError with a sentence if it is none.
        - `head`: the frame's request id and type (`end` closes a stream).
        - `error`: an error frame's code, message and retry_after; None for any other.
        - `streams`: whether `req` is answered with frames up to an end frame.
        - `expects`: the types an answer to `req` may be (None: anything).
        """

        def encode(self, req: Any, rid: int) -> tuple[Id, bytes]: ...
        def decode(self, line: bytes) -> Any: ...
        def head(self, frame: Any) -> tuple[Id, str | None]: ...
        def error(self, frame: Any) -> tuple[str, str, float | None] | None: ...
        def streams(self, req: Any) -> bool: ...
        def expects(self, req: Any) -> tuple[type, ...] | None: ...


class FrameTooLong(Exception):
    """A line grew past the cap before its newline arrived. `complete`: the lines whole
    before it in the same feed, still to be acted on before the connection is given up."""

    def __init__(self, complete: list[bytes] | None = None):
        super().__init__()
        self.complete = complete or []


class LineBuffer:
    """Splits a byte stream into lines of at most `max_line` bytes (newline excluded);
    past that, FrameTooLong (it never holds more of an unfinished line)."""

    def __init__(self, max_line: int):
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
                raise FrameTooLong(lines)
            lines.append(bytes(self._buf[start:nl]))
            start = nl + 1
        del self._buf[:start]
        if len(self._buf) > self.max_line:
            raise FrameTooLong(lines)
        return lines


# The longest answer line a client takes: the daemon's caps bound its answers far below
# this; it only keeps a broken or hostile peer from growing the buffer without end.
ANSWER_BYTES = 64 * 1024 * 1024


class Answer:
    """One frame from the daemon, decoded: `id` the request it answers (None: the
    connection's own error), `error` the refusal it carries, `done` when no more frames
    will come for that request (or it answers no waiting one)."""

    __slots__ = ("id", "frame", "error", "done")

    def __init__(self, rid: "Id", frame: "Any", error: WireError | None, done: bool):
        self.id = rid
        self.frame = frame
        self.error = error
        self.done = done

    def result(self) -> "Any":
        """The frame, or the refusal raised."""
        if self.error is not None:
            raise self.error
        return self.frame

    def belongs(self, rid: "Id") -> bool:
        """Whether this frame answers request `rid`: its own frames, or the connection's
        own error (no id: the daemon closes after it), which ends every request."""
        return self.id == rid or (self.id is None and self.error is not None)

    def __repr__(self) -> str:
        return f"Answer(id={self.id!r}, done={self.done}, error={self.error!r})"


class NeedData:
    """Nothing complete yet: read more from the socket and `receive_data` it."""

    def __repr__(self) -> str:
        return "NEED_DATA"


class Closed:
    """The daemon closed the connection and every answer it sent has been taken."""

    def __repr__(self) -> str:
        return "CLOSED"


NEED_DATA = NeedData()
CLOSED = Closed()


class ClientProtocol:
    """One connection's client state: ids handed out, requests waiting, bytes received.

    Not thread-safe and not reentrant: a shell drives it from one task at a time.
    """

    def __init__(self, codec: "Codec", max_line: int = ANSWER_BYTES):
        self.codec = codec
        self.max_line = max_line
        self._lines = LineBuffer(max_line)
        self._ready: list[bytes] = []  # whole lines not yet turned into events
        self._next_id = 0
        # Requests that expect answers, by id: whether it is a stream (frames up to
        # `end`), and what its answers may be (the codec's `expects`).
        self._waiting: dict[Id, tuple[bool, Any]] = {}
        self._eof = False
        self._broken: WireError | None = None

    # ------------------------------------------------------------ out

    def send(
        self, req: "Any", *, stream: bool | None = None, track: bool = True
    ) -> "tuple[Id, bytes]":
        """Frame one request: its id and the bytes to write. `track=False` for requests
        whose answers are read in order without matching (attach's keystrokes)."""
        self._next_id += 1
        rid, line = self.codec.encode(req, self._next_id)
        if track:
            if stream is None:
                stream = self.codec.streams(req)
            self._waiting[rid] = (stream, self.codec.expects(req))
        return rid, line

    def forget(self, rid: "Id") -> None:
        """The waiter of `rid` gave up (cancelled): its late answers count as no one's."""
        self._waiting.pop(rid, None)

    def waiting(self, rid: "Id") -> bool:
        """Whether `rid` still expects frames."""
        return rid in self._waiting

    # ------------------------------------------------------------ in

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the socket; b"" means the daemon closed it."""
        if not data:
            self._eof = True
            return
        if self._broken is not None:
            return  # the stream lost its framing: nothing after the overlong line counts
        try:
            self._ready += self._lines.feed(data)
        except FrameTooLong as too:
            self._ready += too.complete  # whole answers before it are still answers
            self._broken = WireError(
                "protocol", f"an answer from the daemon is longer than {self.max_line} bytes"
            )

    def has_event(self) -> bool:
        """Whether `next_event` would give something other than NEED_DATA (which a shell
        must take before it waits on the socket: select() cannot show them)."""
        return bool(self._ready) or self._broken is not None or self._eof

    def next_event(self) -> "Answer | NeedData | Closed":
        """The next answer, NEED_DATA, or CLOSED. Raises WireError (`protocol`) for a line
        that does not decode (consumed) and for an overlong answer (for good)."""
        if self._ready:
            return self._answer(self._ready.pop(0))
        if self._broken is not None:
            raise self._broken
        return CLOSED if self._eof else NEED_DATA

    def next_answer(self) -> "Answer | None":
        """The next answer, or None while the socket must be read for it; raises what
        next_event raises, and `closed()` once the daemon closed the connection."""
        event = self.next_event()
        if event is CLOSED:
            raise closed()
        return event if isinstance(event, Answer) else None

    def _answer(self, line: bytes) -> Answer:
        try:
            frame = self.codec.decode(line)
        except ValueError as err:
            raise WireError("protocol", str(err)) from None
        rid, kind = self.codec.head(frame)
        parts = self.codec.error(frame)
        error = None if parts is None else WireError(parts[0] or "protocol", *parts[1:])
        if rid is None and error is not None:
            self._waiting.clear()
            return Answer(rid, frame, error, True)
        waiting = self._waiting.get(rid)
        if waiting is None:
            return Answer(rid, frame, error, True)
        stream, expected = waiting
        end = stream and kind == "end"
        if error is None and not end and expected and not isinstance(frame, expected):
            error = WireError(
                "protocol", f"the daemon answered with a frame of type {kind!r}, not the answer"
            )
        done = error is not None or not stream or end
        if done:
            del self._waiting[rid]
        return Answer(rid, frame, error, done)


def closed() -> Disconnected:
    """The daemon closed the connection before the answer came."""
    return Disconnected("protocol", "the daemon closed the connection")
