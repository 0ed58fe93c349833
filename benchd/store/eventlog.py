"""events.jsonl: the append-only event log, one JSON object per line (`seq` strictly
increasing, `ts` in ms, `kind`, fields).

Only the committer appends, a batch at a time and without a flush: the batch's journal
record makes the lines durable (store/journal.py); only the journal's replay rewrites
it. `--since` searches by byte offset (seq is near the start of every line). Past
`--event-log-bytes` it is rotated to events.1.jsonl (docs/durability.md, "The event
log's bound").
"""

import contextlib
import os
from collections.abc import Iterator
from typing import Any, BinaryIO

import msgspec

from benchd.store.fileio import faults, fsync_dir, write_all

_TAIL = 64 * 1024
_decoder = msgspec.json.Decoder()

# A logged event as read back: a JSON object, the shape bench_wire's EventFrame.event
# carries (each kind's fields differ; the client decodes them).
Record = dict[str, Any]


def seq_of(line: bytes) -> int | None:
    # The daemon writes every line as {"seq":N,"ts":...}: read the seq from the head of
    # the line without decoding the whole line (tolerating another field order).
    at = line.find(b'"seq":', 0, 64)
    if at < 0:
        return None
    start = at + 6
    end = start
    while end < len(line) and 48 <= line[end] <= 57:
        end += 1
    # Only a complete field counts: a torn line cut inside the digits says nothing.
    if end == start or line[end : end + 1] not in (b",", b"}"):
        return None
    return int(line[start:end])


class EventLog:
    def __init__(self, path: str, max_bytes: int = 0):
        self.path = path
        stem, ext = os.path.splitext(path)
        self.prev_path = f"{stem}.1{ext}"  # the rotated log: events.1.jsonl
        self.max_bytes = max_bytes  # rotate once the file holds this much (0: never)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self.newline_owed = False  # a torn last line still needs its newline
        self.last_seq, self.torn = self._recover()
        if self.last_seq == 0:
            # A rotation's new file with nothing in it yet (a crash right after it): the
            # seqs go on from the rotated file's.
            self.last_seq = _last_seq_of(self.prev_path)
        # The newest seq whose batch is durable and answered. Lines past it may sit in
        # the file while their batch is still being flushed: readers stop before them
        # (the live stream delivers them once the batch is done).
        self.published_seq = self.last_seq

    def _recover(self) -> tuple[int, bool]:
        size = os.fstat(self.fd).st_size
        if size == 0:
            return 0, False
        start = max(0, size - _TAIL)
        tail = os.pread(self.fd, size - start, start)
        torn = not tail.endswith(b"\n")
        if torn:
            # Keep the fragment as its own (unparseable, skipped) line. On a full disk
            # the newline goes in front of the next write instead.
            try:
                os.write(self.fd, b"\n")
                os.fsync(self.fd)
            except OSError:
                self.newline_owed = True
        last = 0
        for line in reversed(tail.split(b"\n")):
            try:
                obj = _decoder.decode(line)
            except msgspec.DecodeError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("seq"), int):
                last = obj["seq"]
                break
        if last == 0 and start > 0:
            last = _scan_last_seq(self.path)
        return last, torn

    # ------------------------------------------------------------ rotation

    def due(self) -> bool:
        """Whether the log holds its bound (`--event-log-bytes`) and should rotate."""
        return self.max_bytes > 0 and os.fstat(self.fd).st_size >= self.max_bytes

    def rotate(self) -> tuple[int, int]:
        """events.jsonl becomes events.1.jsonl (the one before is dropped) and a new,
        empty events.jsonl is opened. Only when no journal record names an offset in
        the log (the committer checkpoints first). Returns the last seq dropped (0:
        none) and the first seq still readable. Raises OSError, changing nothing."""
        dropped = _last_seq_of(self.prev_path) if os.path.exists(self.prev_path) else 0
        os.fdatasync(self.fd)
        fd = os.open(self.path + ".new", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            os.replace(self.path, self.prev_path)
        except OSError:
            os.close(fd)
            os.unlink(self.path + ".new")
            raise
        # Between the two renames a crash leaves no events.jsonl: the next start makes an
        # empty one and goes on from events.1.jsonl's last seq (above).
        os.replace(self.path + ".new", self.path)
        fsync_dir(os.path.dirname(self.path) or ".")
        old, self.fd = self.fd, fd
        os.close(old)
        self.newline_owed = False
        return dropped, _first_seq_of(self.prev_path) or self.last_seq + 1

    def write(self, lines: list[bytes]) -> tuple[int, bytes]:
        """Write encoded lines without a flush (the committer's journal makes them
        durable); returns the offset they start at and their bytes. Raises OSError,
        leaving no partial write behind."""
        faults.check("eventlog")
        data = b"".join([b"\n", *lines] if self.newline_owed else lines)
        before = os.fstat(self.fd).st_size
        try:
            write_all(self.fd, data)
        except OSError:
            self.truncate(before)
            raise
        self.newline_owed = False
        return before, data

    def truncate(self, offset: int) -> None:
        """Take back a write whose batch did not commit (best effort: readers skip a
        fragment left behind)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, offset)

    def close(self) -> None:
        os.close(self.fd)

    # ------------------------------------------------------------ reading

    def read_since(self, since: int, upto: int | None = None) -> Iterator[Record]:
        """Yield decoded events (dicts) with since < seq <= upto, skipping torn lines:
        from the rotated file first when `since` reaches back into it."""
        first = _first_seq_of(self.path)
        if (first is None or since + 1 < first) and os.path.exists(self.prev_path):
            try:
                f = open(self.prev_path, "rb")  # noqa: SIM115 - closed below
            except FileNotFoundError:
                pass  # rotated away meanwhile: its events are gone
            else:
                with f:
                    for obj in _read(f, since, upto):
                        yield obj
                        since = obj["seq"]
        with open(self.path, "rb") as f:
            yield from _read(f, since, upto)


def _read(f: BinaryIO, since: int, upto: int | None) -> Iterator[Record]:
    """The events of one file with since < seq <= upto, skipping torn lines."""
    f.seek(offset_of(f.fileno(), since) if since > 0 else 0)
    for line in f:
        if not line.endswith(b"\n"):
            return  # an append in flight; the follower gets it live
        try:
            obj = _decoder.decode(line)
        except msgspec.DecodeError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int):
            continue
        if obj["seq"] <= since:
            continue
        if upto is not None and obj["seq"] > upto:
            return
        yield obj


def offset_of(fd: int, since: int) -> int:
    """A line start at or before the first line with seq > since (binary search): erring
    early costs a short scan, never an event. A torn line (no seq) counts as "after"."""
    size = os.fstat(fd).st_size
    lo, hi = 0, size
    while hi - lo > 4096:
        mid = (lo + hi) // 2
        start = _next_line(fd, mid - 1, size)  # the first line starting at mid or after
        if start >= hi:
            hi = mid
            continue
        seq = seq_of(os.pread(fd, 96, start))
        if seq is not None and seq <= since:
            lo = start
        else:
            hi = start
    return lo


def _next_line(fd: int, pos: int, size: int) -> int:
    while pos < size:
        chunk = os.pread(fd, 4096, pos)
        nl = chunk.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(chunk)
    return size


def _first_seq_of(path: str) -> int | None:
    """The seq of a file's first line that has one (None: none, or no file)."""
    try:
        with open(path, "rb") as f:
            for _ in range(16):  # a torn fragment or two at most before a whole line
                line = f.readline()
                if not line:
                    return None
                s = seq_of(line)
                if s is not None:
                    return s
    except FileNotFoundError:
        return None
    return None


def _last_seq_of(path: str) -> int:
    """The last seq of a file, read from its tail (0: none, or no file)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - _TAIL)
            f.seek(start)
            tail = f.read()
    except FileNotFoundError:
        return 0
    for line in reversed(tail.split(b"\n")):
        s = seq_of(line + b"\n") if line else None
        if s is not None:
            return s
    return _scan_last_seq(path) if start > 0 else 0


def _scan_last_seq(path: str) -> int:
    last = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                s = seq_of(line)
                if s is not None:
                    last = max(last, s)
    except FileNotFoundError:
        return 0
    return last
