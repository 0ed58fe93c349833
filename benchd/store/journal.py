"""The write-ahead journal: a committed batch costs one write and one fdatasync.

A record holds a batch's message files (path and bytes), its renames and its event-log
bytes with their offset; its fdatasync is the commit point, and the replay
(store/replay.py) puts back what a crash lost. The format, the two preallocated
segments, the checkpoints and what replay does with damage: docs/durability.md
("Durability", "Checkpoints", "The journal").
"""

import errno
import os
import struct
import threading
import zlib
from collections.abc import Callable
from typing import NamedTuple

import trio

from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.store.fileio import Flusher, faults, free_bytes, fsync_dir, write_all

MAGIC = b"BJ02"
# magic, seq, floor, payload length, crc32 of the payload; then a crc32 of those bytes
_HEAD = struct.Struct("<4sQQII")
HEAD_BYTES = _HEAD.size + 4
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


def frame(seq: int, payload: bytes, floor: int | None = None) -> bytes:
    """A record: its head (with a crc of its own) and its payload. `floor`: the oldest
    sequence number not yet checkpointed when it is written (itself, by default)."""
    head = _HEAD.pack(
        MAGIC, seq, seq if floor is None else floor, len(payload), zlib.crc32(payload)
    )
    return head + _U32.pack(zlib.crc32(head)) + payload


class Head(NamedTuple):
    seq: int
    floor: int
    length: int
    crc: int


def head_at(data: bytes, pos: int) -> Head | None:
    """The record head at `pos`, or None where there is none (zeros, a torn or damaged
    head, an older format)."""
    if pos < 0 or pos + HEAD_BYTES > len(data) or data[pos : pos + 4] != MAGIC:
        return None
    (hcrc,) = _U32.unpack_from(data, pos + _HEAD.size)
    if zlib.crc32(data[pos : pos + _HEAD.size]) != hcrc:
        return None
    _magic, seq, floor, length, crc = _HEAD.unpack_from(data, pos)
    return Head(seq, floor, length, crc)


class Record(NamedTuple):
    seq: int
    floor: int
    offset: int  # in its segment
    payload: bytes


class Bad(NamedTuple):
    """A damaged stretch of a segment between whole records: a record whose payload
    fails its crc (its head, and so its seq, intact), or bytes where no head reads."""

    offset: int
    size: int
    seq: int | None
    data: bytes  # the payload as found, or the stretch's bytes


def read_segment(data: bytes) -> tuple[list[Record], list[Bad]]:
    """The records of a segment, in order, and the damaged stretches among them. Where no
    head reads, the next whole record with a higher seq ends the damaged stretch, and
    without one the segment ends (a torn tail, or a reused segment's older records)."""
    good: list[Record] = []
    bad: list[Bad] = []
    if not any(data[:HEAD_BYTES]):
        return good, bad
    pos, last, n = 0, -1, len(data)
    while pos + HEAD_BYTES <= n:
        h = head_at(data, pos)
        end = pos + HEAD_BYTES + (h.length if h else 0)
        if h is not None and h.seq > last and end <= n:
            payload = data[pos + HEAD_BYTES : end]
            if zlib.crc32(payload) == h.crc:
                good.append(Record(h.seq, h.floor, pos, payload))
            else:
                bad.append(Bad(pos, end - pos, h.seq, payload))
            pos, last = end, h.seq
            continue
        nxt = _next_record(data, pos + 1, last)
        if nxt is None:
            break
        bad.append(Bad(pos, nxt - pos, None, data[pos:nxt]))
        pos = nxt
    return good, bad


LEGACY_MAGIC = b"BJ01"
_LEGACY_HEAD = struct.Struct("<4sQII")  # magic, seq, payload length, crc32 of the payload


def read_legacy(data: bytes) -> tuple[list[Record], list[Bad]]:
    """A segment an earlier version wrote (a crash just before an upgrade): its records
    up to the first that fails, as that version read them."""
    good: list[Record] = []
    pos, expect = 0, None
    while pos + _LEGACY_HEAD.size <= len(data):
        magic, seq, length, crc = _LEGACY_HEAD.unpack_from(data, pos)
        end = pos + _LEGACY_HEAD.size + length
        if magic != LEGACY_MAGIC or (expect is not None and seq != expect) or end > len(data):
            break
        payload = data[pos + _LEGACY_HEAD.size : end]
        if zlib.crc32(payload) != crc:
            break
        good.append(Record(seq, 0, pos, payload))
        pos, expect = end, seq + 1
    return good, []


def _next_record(data: bytes, start: int, last: int) -> int | None:
    """Where the next whole record with a seq above `last` starts, from `start` on."""
    at = data.find(MAGIC, start)
    while at >= 0:
        h = head_at(data, at)
        if h is not None and h.seq > last:
            end = at + HEAD_BYTES + h.length
            if end <= len(data) and zlib.crc32(data[at + HEAD_BYTES : end]) == h.crc:
                return at
        at = data.find(MAGIC, at + 1)
    return None


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


def drop(fd: int, preallocated: bool) -> None:
    """Make a segment replay nothing: zero its first head (one overwritten in place),
    or empty it (one that grows with its records)."""
    if preallocated:
        write_all(fd, bytes(HEAD_BYTES), 0)
        os.fdatasync(fd)
    else:
        os.ftruncate(fd, 0)
        os.fsync(fd)


# ---------------------------------------------------------------- the running journal


class _Segment:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.pos = 0  # where the next record goes
        self.entries: list[list[Entry]] = []  # its records, for the checkpoint
        self.first_at = 0.0
        self.base = 0  # the seq of its first record (while it has entries)
        self.preallocated = True  # overwritten in place (else it grows, and is emptied)
        # Clear while a worker thread checkpoints it; the thread sets it when done, so
        # the loop can wait for it without the loop's help (a rare, short wait).
        self.idle = threading.Event()
        self.idle.set()
        self.error: OSError | None = None  # the last checkpoint's failure


class Journal:
    """The committer's journal (`replay()` runs first, before the event log is opened)."""

    def __init__(
        self,
        root: str,
        log_fd: Callable[[], int],
        *,
        preallocate: bool = PREALLOCATE,
        segment_bytes: int = SEGMENT_BYTES,
        checkpoint_s: float = CHECKPOINT_S,
        on_checkpoint_error: Callable[[OSError], None] = lambda err: None,
        reserve: int = 0,
        now: Callable[[], float] = trio.current_time,
        wall: WallClock = SYSTEM_WALL,
    ) -> None:
        self.root = root
        # A segment's age, for its checkpoint: trio's clock, read by commit() on the loop.
        self.now = now
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
        self.seq = wall.wall_ms() * 1_000_000  # in ns: a record a run commits adds 1
        self.checkpoints = 0
        self.reserve = reserve  # free bytes preallocation never takes
        self.low: tuple[int, int] | None = None  # (free, reserve) when it gave way
        self._nursery: trio.Nursery | None = None  # run()'s, while it runs

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Where the checkpoints run (each in a worker thread), so the daemon waits for
        them and a failure stops it rather than dying unseen. Cancelled, it still waits
        for a checkpoint under way; after it, checkpoints are done in place (`close`)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def open(self) -> None:
        """Open both segments, empty (after `replay`), preallocating them if asked."""
        made = False
        for seg in self.segments:
            made = made or not os.path.exists(seg.path)
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            size = os.fstat(seg.fd).st_size
            seg.preallocated = self.preallocate
            if self.preallocate and size < self.segment_bytes:
                free = free_bytes(self.root)
                if free - (self.segment_bytes - size) < self.reserve:
                    # Preallocating would eat into the reserve (room for the index, the
                    # log and the start itself): this segment grows with its records.
                    self.low = (free, self.reserve)
                    seg.preallocated = False
                    size = 1
            if seg.preallocated and size < self.segment_bytes:
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
                drop(seg.fd, preallocated=False)
        if made:
            fsync_dir(self.root)

    def commit(self, entries: list[Entry]) -> None:
        """Write the batch's record and make it durable: the commit point. Raises OSError
        (the batch is then not committed)."""
        seg = self.segments[self.active]
        payload = encode_entries(entries, self.root)
        if seg.entries and (
            seg.pos + HEAD_BYTES + len(payload) > self.segment_bytes
            or self.now() - seg.first_at > self.checkpoint_s
        ):
            seg = self._switch()
        # The oldest record not yet checkpointed: replay ignores any record older than
        # the newest floor it reads (a dropped segment's leftovers, whatever its head).
        bases = [s.base for s in self.segments if s.entries]
        record = frame(self.seq, payload, min(bases, default=self.seq))
        try:
            faults.check("journal")
            write_all(seg.fd, record, seg.pos)
            os.fdatasync(seg.fd)
        except OSError:
            try:  # so the record can never be replayed; the next one goes in its place
                write_all(seg.fd, bytes(HEAD_BYTES), seg.pos)
                os.fdatasync(seg.fd)
            except OSError:
                pass
            raise
        if not seg.entries:
            seg.first_at = self.now()
            seg.base = self.seq
        seg.entries.append(entries)
        seg.pos += len(record)
        self.seq += 1

    def _switch(self) -> _Segment:
        old = self.segments[self.active]
        new = self.segments[1 - self.active]
        # Still flushing what it held: wait (rare: a segment fills in far longer than its
        # checkpoint takes).
        new.idle.wait()
        if new.entries:
            self._checkpoint(new)  # its last checkpoint failed: once more, here
            if new.error is not None:
                raise new.error
        self.active = 1 - self.active
        if self._nursery is None:  # not running (a tool, the start, the stop): here
            self._checkpoint(old)
        else:
            old.idle.clear()
            self._nursery.start_soon(self._checkpoint_off_the_loop, old)
        return new

    async def _checkpoint_off_the_loop(self, seg: _Segment) -> None:
        # Shielded: a checkpoint started is finished even while the daemon stops (a
        # cancelled one would leave the segment held, and `close` waiting for it).
        with trio.CancelScope(shield=True):
            err = await trio.to_thread.run_sync(self._flush_then_idle, seg)
        if err is not None:
            self.on_checkpoint_error(err)  # on the loop, like every other report

    def _flush_then_idle(self, seg: _Segment) -> OSError | None:
        try:
            return self._flush(seg)
        finally:
            seg.idle.set()

    def _checkpoint(self, seg: _Segment) -> None:
        err = self._flush(seg)
        if err is not None:
            self.on_checkpoint_error(err)

    def _flush(self, seg: _Segment) -> OSError | None:
        """Flush what the segment's records touched, then drop it; the failure, if any,
        is kept in `seg.error` and returned."""
        touched = _Touched(self.root)
        for entries in seg.entries:
            touched.add(entries)
        try:
            touched.flush(self.flusher, [self.log_fd()])
            drop(seg.fd, seg.preallocated)
        except OSError as err:
            seg.error = err
            return err
        seg.error = None
        seg.entries = []
        seg.pos = 0
        self.checkpoints += 1
        return None

    def checkpoint_now(self) -> bool:
        """Checkpoint every record now, on the caller's thread, so no record names a log
        offset (the event log may rotate). False if a checkpoint failed (the records
        stay; nothing is lost)."""
        for seg in self.segments:
            seg.idle.wait()  # a checkpoint under way in a worker thread finishes first
        ok = True
        for seg in self.segments:
            if seg.entries:
                self._checkpoint(seg)
                ok = ok and seg.error is None
        return ok

    def close(self) -> bool:
        """A clean stop: checkpoint everything, so the next start replays nothing.
        False if a checkpoint failed (the next start replays; nothing is lost)."""
        ok = self.checkpoint_now()
        for seg in self.segments:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1
        return ok
