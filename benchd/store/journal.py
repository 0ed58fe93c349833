"""The write-ahead journal: a committed batch costs one write and one fdatasync.

A batch's whole record goes into one journal record: the message files it creates
(path and exact bytes), the renames it does (inbox/ -> read/), and the exact event-log
bytes with the log offset they go to. The record's fdatasync is the commit point. The
files and the log were written before it and the renames are done after it, all
without a flush of their own: after a crash, `replay` puts every committed record's
effects back from the journal.

Records: a 20-byte head (magic, sequence number, payload length, crc32 of the payload)
and the payload. The sequence numbers run on across segments; a segment's records are
read from its start while each head is whole, its sequence is the one after the last,
and its crc matches: the first record that fails (a torn write at a crash, or an older
record the segment held before it was reused) ends the segment.

Two segment files, `journal-0` and `journal-1` in the state dir, take turns. Each is
preallocated with zeros (written and flushed once, when it is made), and records
overwrite it in place: an fdatasync then has only data to write, never the file's new
size (an append's fdatasync also commits the size through the filesystem's journal).
When the active segment is full (SEGMENT_BYTES) or its first record is CHECKPOINT_S old,
the other segment becomes the active one, and a worker thread checkpoints the old one:
it flushes everything the old segment's records touched (fdatasync of each file, fsync
of each directory, fdatasync of the log), then drops the segment by zeroing its first
head. A clean stop checkpoints both, so the next start replays nothing.
"""

import errno
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable
from typing import NamedTuple

from benchd.store import faults
from benchd.store.fileio import write_all
from benchd.store.flush import Flusher

MAGIC = b"BJ01"
_HEAD = struct.Struct("<4sQII")  # magic, seq, payload length, crc32 of the payload
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
SEGMENTS = ("journal-0", "journal-1")
SEGMENT_BYTES = 4 << 20
CHECKPOINT_S = 30.0
PREALLOCATE = True
REPLAY_TMP = ".journal-replay.tmp"  # in the state dir: where a file is rebuilt before its rename


class Write(NamedTuple):
    """A file that holds exactly `data` at `path`, or at `alt` once a later rename moved
    it there (a message read meanwhile: inbox/ -> read/)."""

    path: str
    data: bytes
    alt: str = ""


class Rename(NamedTuple):
    src: str
    dst: str


class Append(NamedTuple):
    """Event-log bytes and the log offset they start at."""

    offset: int
    data: bytes


Entry = Write | Rename | Append


class BadRecord(ValueError):
    pass


# ---------------------------------------------------------------- framing (pure)


def _str(s: str) -> bytes:
    b = s.encode("utf-8", "surrogateescape")
    return _U32.pack(len(b)) + b


def encode_entries(entries: list[Entry], root: str) -> bytes:
    """A record's payload. Paths are stored relative to the state dir (`root`), so a
    state dir moved between a crash and the next start still replays."""
    out: list[bytes] = []
    cut = len(root) + 1
    for e in entries:
        if isinstance(e, Write):
            out += (b"W", _str(_rel(e.path, root, cut)), _str(_rel(e.alt, root, cut)))
            out += (_U32.pack(len(e.data)), e.data)
        elif isinstance(e, Rename):
            out += (b"R", _str(_rel(e.src, root, cut)), _str(_rel(e.dst, root, cut)))
        else:
            out += (b"L", _U64.pack(e.offset), _U32.pack(len(e.data)), e.data)
    return b"".join(out)


def _rel(path: str, root: str, cut: int) -> str:
    if path and path.startswith(root) and path[cut - 1 : cut] == "/":
        return path[cut:]
    return path  # absolute (outside the state dir), or "" (no alt)


def decode_entries(payload: bytes, root: str) -> list[Entry]:
    entries: list[Entry] = []
    pos, n = 0, len(payload)

    def take(k: int) -> bytes:
        nonlocal pos
        if pos + k > n:
            raise BadRecord("entry runs past the record")
        b = payload[pos : pos + k]
        pos += k
        return b

    def path() -> str:
        (k,) = _U32.unpack(take(4))
        s = take(k).decode("utf-8", "surrogateescape")
        return os.path.join(root, s) if s else ""

    while pos < n:
        kind = take(1)
        if kind == b"W":
            p, alt = path(), path()
            (k,) = _U32.unpack(take(4))
            entries.append(Write(p, take(k), alt))
        elif kind == b"R":
            entries.append(Rename(path(), path()))
        elif kind == b"L":
            (offset,) = _U64.unpack(take(8))
            (k,) = _U32.unpack(take(4))
            entries.append(Append(offset, take(k)))
        else:
            raise BadRecord(f"unknown entry kind {kind!r}")
    return entries


def frame(seq: int, payload: bytes) -> bytes:
    return _HEAD.pack(MAGIC, seq, len(payload), zlib.crc32(payload)) + payload


def read_segment(data: bytes) -> list[tuple[int, bytes]]:
    """The whole, valid records at the start of a segment: [(seq, payload)], ending at
    the first torn, stale or bad-crc record."""
    records: list[tuple[int, bytes]] = []
    pos, expect = 0, None
    while pos + _HEAD.size <= len(data):
        magic, seq, length, crc = _HEAD.unpack_from(data, pos)
        if magic != MAGIC or (expect is not None and seq != expect):
            break
        end = pos + _HEAD.size + length
        if end > len(data):
            break
        payload = data[pos + _HEAD.size : end]
        if zlib.crc32(payload) != crc:
            break
        records.append((seq, payload))
        pos, expect = end, seq + 1
    return records


# ---------------------------------------------------------------- replay


class Replayed(NamedTuple):
    records: int
    files: int  # message files written back (missing, or their bytes differed)
    renames: int  # renames done again
    log_bytes: int  # event-log bytes written back


def replay(root: str, log_path: str, flusher: Flusher | None = None) -> Replayed:
    """Put back every committed record's effects, in order, then make them durable and
    drop the segments. Idempotent: a crash part way through replays the same records
    again, to the same end state."""
    segments = []
    for name in SEGMENTS:
        try:
            with open(os.path.join(root, name), "rb") as f:
                head = f.read(_HEAD.size)
                if head[:4] != MAGIC:
                    continue  # empty (the usual start): not worth reading the segment
                recs = read_segment(head + f.read())
        except FileNotFoundError:
            continue
        if recs:
            segments.append(recs)
    segments.sort(key=lambda recs: recs[0][0])
    records = [decode_entries(payload, root) for recs in segments for _seq, payload in recs]
    if not records:
        return Replayed(0, 0, 0, 0)
    files = renames = log_bytes = 0
    touched = _Touched(root)
    log_end = None
    log_fd = os.open(log_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        for entries in records:
            for e in entries:
                if type(e) is Write:
                    files += _restore(e, root)
                elif type(e) is Rename:
                    if os.path.lexists(e.src):
                        os.makedirs(os.path.dirname(e.dst), 0o700, exist_ok=True)
                        os.rename(e.src, e.dst)
                        renames += 1
                else:
                    assert type(e) is Append
                    if os.pread(log_fd, len(e.data), e.offset) != e.data:
                        write_all(log_fd, e.data, e.offset)
                        log_bytes += len(e.data)
                    log_end = e.offset + len(e.data)
            touched.add(entries)
        if log_end is not None and os.fstat(log_fd).st_size != log_end:
            # Lines past the last committed batch belong to a batch that was never
            # answered: its commit did not reach the journal.
            os.ftruncate(log_fd, log_end)
        touched.flush(flusher or Flusher(), [log_fd])
    finally:
        os.close(log_fd)
    for name in SEGMENTS:
        _drop(os.path.join(root, name))
    return Replayed(len(records), files, renames, log_bytes)


def _restore(e: Write, root: str) -> int:
    """Make e.path (or e.alt, where a later rename moved it) hold e.data; 1 if written."""
    for p in (e.path, e.alt):
        if not p:
            continue
        try:
            with open(p, "rb") as f:
                if f.read(len(e.data) + 1) == e.data:
                    return 0
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            return 0  # not ours to replace
        _write_file(p, e.data, root)  # there, but torn: rewrite it where it is
        return 1
    _write_file(e.path, e.data, root)
    return 1


def _write_file(path: str, data: bytes, root: str) -> None:
    os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
    tmp = os.path.join(root, REPLAY_TMP)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data, 0)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def _drop(path: str) -> None:
    """Make a segment replay nothing: zero its first head (preallocated), or empty it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        if os.fstat(fd).st_size >= SEGMENT_BYTES:
            write_all(fd, bytes(_HEAD.size), 0)
            os.fdatasync(fd)
        else:
            os.ftruncate(fd, 0)
            os.fsync(fd)
    finally:
        os.close(fd)


class _Touched:
    """What a set of records touched, to flush at a checkpoint."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.moved: dict[str, str] = {}  # file -> where a later rename may have put it
        self.dirs: set[str] = set()

    def add(self, entries: list[Entry]) -> None:
        for e in entries:
            if type(e) is Write:
                self.moved[e.path] = e.alt
                self._dirs_of(e.path)
            elif type(e) is Rename:
                self._dirs_of(e.src)
                self._dirs_of(e.dst)

    def _dirs_of(self, path: str) -> None:
        # The file's directory and each one above it up to the state dir: a new
        # mailbox's own entry must be durable too.
        d = os.path.dirname(path)
        while d not in self.dirs and len(d) >= len(self.root) and d.startswith(self.root):
            self.dirs.add(d)
            d = os.path.dirname(d)

    def flush(self, flusher: Flusher, fds: list[int]) -> None:
        dirs = [d for d in self.dirs if os.path.isdir(d)]  # a mailbox removed by hand
        flusher.flush(dirs=dirs, fds=fds, moved=self.moved.items())


# ---------------------------------------------------------------- the running journal


class _Segment:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.pos = 0  # where the next record goes
        self.entries: list[list[Entry]] = []  # its records, for the checkpoint
        self.first_at = 0.0
        self.preallocated = True  # overwritten in place (else it grows, and is emptied)
        self.checkpoint: threading.Thread | None = None
        self.error: OSError | None = None  # the last checkpoint's failure


class Journal:
    """The committer's journal (used from one thread at a time; checkpoints run in a
    thread of their own). `replay()` must run first, before the event log is opened."""

    def __init__(
        self,
        root: str,
        log_fd: Callable[[], int],
        *,
        preallocate: bool = PREALLOCATE,
        segment_bytes: int = SEGMENT_BYTES,
        checkpoint_s: float = CHECKPOINT_S,
        on_checkpoint_error: Callable[[OSError], None] = lambda err: None,
    ) -> None:
        self.root = root
        self.log_fd = log_fd  # the event log's fd, flushed at each checkpoint
        self.preallocate = preallocate
        self.segment_bytes = segment_bytes
        self.checkpoint_s = checkpoint_s
        self.on_checkpoint_error = on_checkpoint_error
        self.flusher = Flusher()
        self.segments = [_Segment(os.path.join(root, n)) for n in SEGMENTS]
        self.active = 0
        # Sequence numbers start from the clock, so a record left in a reused segment by
        # an earlier run can never pass for the next one of this run.
        self.seq = time.time_ns()
        self.checkpoints = 0

    def open(self) -> None:
        """Open both segments, empty (after `replay`), preallocating them if asked."""
        made = False
        for seg in self.segments:
            made = made or not os.path.exists(seg.path)
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            size = os.fstat(seg.fd).st_size
            seg.preallocated = self.preallocate
            if self.preallocate and size < self.segment_bytes:
                try:
                    faults.check("journal-prealloc")
                    write_all(seg.fd, bytes(self.segment_bytes - size), size)
                    os.fsync(seg.fd)
                except OSError as err:
                    if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    # A nearly full disk must not stop the start: this segment grows
                    # with its records instead (each fdatasync then commits a size).
                    seg.preallocated = False
                    size = 1
            if not seg.preallocated and size:
                os.ftruncate(seg.fd, 0)
                os.fsync(seg.fd)
        if made:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def commit(self, entries: list[Entry]) -> None:
        """Write the batch's record and make it durable: the commit point. Raises OSError
        (the batch is then not committed)."""
        seg = self.segments[self.active]
        record = frame(self.seq, encode_entries(entries, self.root))
        if seg.entries and (
            seg.pos + len(record) > self.segment_bytes
            or time.monotonic() - seg.first_at > self.checkpoint_s
        ):
            seg = self._switch()
        try:
            faults.check("journal")
            write_all(seg.fd, record, seg.pos)
            os.fdatasync(seg.fd)
        except OSError:
            try:  # so the record can never be replayed; the next one goes in its place
                write_all(seg.fd, bytes(_HEAD.size), seg.pos)
                os.fdatasync(seg.fd)
            except OSError:
                pass
            raise
        if not seg.entries:
            seg.first_at = time.monotonic()
        seg.entries.append(entries)
        seg.pos += len(record)
        self.seq += 1

    def _switch(self) -> _Segment:
        old = self.segments[self.active]
        new = self.segments[1 - self.active]
        if new.checkpoint is not None:
            new.checkpoint.join()  # still flushing what it held: wait (rare: a segment fills
            new.checkpoint = None  # in far longer than its checkpoint takes)
        if new.entries:
            self._checkpoint(new)  # its last checkpoint failed: once more, here
            if new.error is not None:
                raise new.error
        self.active = 1 - self.active
        old.checkpoint = threading.Thread(
            target=self._checkpoint, args=(old,), name="checkpoint", daemon=True
        )
        old.checkpoint.start()
        return new

    def _checkpoint(self, seg: _Segment) -> None:
        touched = _Touched(self.root)
        for entries in seg.entries:
            touched.add(entries)
        try:
            touched.flush(self.flusher, [self.log_fd()])
            if seg.preallocated:
                write_all(seg.fd, bytes(_HEAD.size), 0)
                os.fdatasync(seg.fd)
            else:
                os.ftruncate(seg.fd, 0)
                os.fsync(seg.fd)
        except OSError as err:
            seg.error = err
            self.on_checkpoint_error(err)
            return
        seg.error = None
        seg.entries = []
        seg.pos = 0
        self.checkpoints += 1

    def close(self) -> bool:
        """A clean stop: checkpoint everything, so the next start replays nothing.
        False if a checkpoint failed (the next start replays; nothing is lost)."""
        ok = True
        for seg in self.segments:
            if seg.checkpoint is not None:
                seg.checkpoint.join()
                seg.checkpoint = None
        for seg in self.segments:
            if seg.entries:
                self._checkpoint(seg)
                ok = ok and seg.error is None
        for seg in self.segments:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1
        return ok

    def size(self) -> int:
        """Bytes of records the journal holds now (both segments)."""
        return sum(seg.pos for seg in self.segments)
