"""The bounded line buffer both ends of the socket split JSON lines with.

Stdlib only (no msgspec): the daemon's connections and the CLI's fast path both use it,
and the fast path may import nothing heavy (tests/unit/test_imports.py).
"""


class FrameTooLong(Exception):
    """A line grew past the cap before its newline arrived.

    `complete` holds the lines that were whole before it in the same feed, so a reader
    can still act on them (the client protocol answers their requests) before it gives
    up on the connection.
    """

    def __init__(self, complete: list[bytes] | None = None):
        super().__init__()
        self.complete = complete or []


class LineBuffer:
    """Splits a byte stream into lines of at most `max_line` bytes (newline excluded).

    Feed it whatever recv() returned; it returns the complete lines. It never holds more
    than `max_line` bytes of an unfinished line: past that it raises FrameTooLong, and
    the connection should be answered and closed.
    """

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
