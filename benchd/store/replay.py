"""Replay of the write-ahead journal at start, before the event log or the index is
opened: every committed record's effects put back, flushed, and both segments dropped.
What each kind of damage does: docs/durability.md, "The journal"; each damaged stretch
becomes a journal/damaged event.
"""

import json
import os
import re
from typing import NamedTuple

from bench_wire.messages import JournalDamaged
from benchd.store.eventlog import seq_of
from benchd.store.fileio import Flusher, replace_file, write_all
from benchd.store.journal import (
    HEAD_BYTES,
    LEGACY_MAGIC,
    REPLAY_TMP,
    SEGMENT_BYTES,
    SEGMENTS,
    Append,
    Bad,
    Record,
    Rename,
    Write,
    _Touched,
    decode_entries,
    drop,
    read_legacy,
    read_segment,
)

# What a damaged stretch names, read from its bytes as found (its structure may be
# what the damage hit): message paths and event heads.
_MESSAGE = re.compile(
    rb"mail/([A-Za-z0-9@._-]{1,64})/(?:inbox|read)/(\d{8}T\d{6}\.\d{3}Z-\d{4,9})\.md"
)
_EVENT = re.compile(rb'\{"seq":(\d{1,19}),')


class Replayed(NamedTuple):
    records: int
    files: int  # message files written back (missing, or their bytes differed)
    renames: int  # renames done again
    log_bytes: int  # event-log bytes written back
    damage: list[JournalDamaged] = []  # a journal/damaged event per damaged stretch
    cut_seq: int = 0  # the highest seq of the uncommitted lines cut from the log


class _Live(NamedTuple):
    segment: str
    record: Record


def _read(root: str) -> tuple[list[_Live], list[tuple[str, Bad, bool]]]:
    """The live records of both segments in seq order, and the damaged stretches among
    them: (segment, stretch, whether a live record follows it in its segment)."""
    good: list[_Live] = []
    bad: list[tuple[str, Bad]] = []
    for name in SEGMENTS:
        try:
            with open(os.path.join(root, name), "rb") as f:
                head = f.read(HEAD_BYTES)
                if not any(head):
                    continue  # empty (the usual start): not worth reading the segment
                data = head + f.read()
            recs, bads = read_segment(data) if head[:4] != LEGACY_MAGIC else read_legacy(data)
        except FileNotFoundError:
            continue
        good += [_Live(name, r) for r in recs]
        bad += [(name, b) for b in bads]
    # Anything older than the newest floor was checkpointed: a dropped segment's
    # leftovers, should a damaged first head have let them be read.
    floor = max((x.record.floor for x in good), default=0)
    live = sorted((x for x in good if x.record.seq >= floor), key=lambda x: x.record.seq)
    last: dict[str, int] = {}
    for x in live:
        last[x.segment] = max(last.get(x.segment, -1), x.record.offset)
    stretches = []
    for name, b in bad:
        followed = b.offset < last.get(name, -1)
        if (b.seq is not None and b.seq >= floor) or (b.seq is None and followed):
            stretches.append((name, b, followed))
    return live, stretches


def replay(root: str, log_path: str, flusher: Flusher | None = None) -> Replayed:
    """Put back every committed record's effects, in order, then make them durable and
    drop the segments. Idempotent: a crash part way through replays the same records."""
    live, stretches = _read(root)
    if not live and not stretches:
        return Replayed(0, 0, 0, 0)
    records = [decode_entries(x.record.payload, root) for x in live]
    files = renames = log_bytes = 0
    touched = _Touched(root)
    appends: list[Append] = []
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
                    appends.append(e)
            touched.add(entries)
        damage = [_describe(root, log_fd, name, b, appends) for name, b, _ in stretches]
        cut_seq = 0
        if appends and all(followed for _n, _b, followed in stretches):
            # The journal ends cleanly after its last record: lines past that record's
            # batch are an uncommitted batch's, unless its files were placed (which
            # happens only after a commit): then that batch's record was damaged.
            end = appends[-1].offset + len(appends[-1].data)
            size = os.fstat(log_fd).st_size
            tail = os.pread(log_fd, size - end, end) if size > end else b""
            placed = _placed(tail)
            if placed:
                x = live[-1]
                at = x.record.offset + HEAD_BYTES + len(x.record.payload)
                damage.append(_describe(root, log_fd, x.segment, Bad(at, 0, None, tail), appends))
            else:
                cut_seq = _cut_uncommitted(log_fd, appends[-1], tail)
        touched.flush(flusher or Flusher(), [log_fd])
    finally:
        os.close(log_fd)
    for name in SEGMENTS:
        _drop(os.path.join(root, name))
    return Replayed(len(records), files, renames, log_bytes, damage, cut_seq)


def _placed(tail: bytes) -> bool:
    """Whether a message of these log lines is in inbox/ or read/ (placed: committed)."""
    for line in tail.split(b"\n"):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(ev, dict)
            and ev.get("kind") in ("mail/sent", "mail/read")
            and isinstance(ev.get("path"), str)
            and os.path.lexists(ev["path"])
        ):
            return True
    return False


def _cut_uncommitted(log_fd: int, last: Append, tail: bytes) -> int:
    """Cut the lines past the last committed batch (never answered), unless one of them
    comes before it. Returns the highest seq cut, so none is handed out again."""
    if not tail:
        return 0
    last_seq = max((s for s in map(seq_of, last.data.split(b"\n")) if s is not None), default=0)
    seqs = [s for s in map(seq_of, tail.split(b"\n")) if s is not None]
    if any(s <= last_seq for s in seqs):
        return 0  # not one batch's lines after ours: never shorten what may be durable
    os.ftruncate(log_fd, last.offset + len(last.data))
    return max(seqs, default=0)


def _describe(
    root: str, log_fd: int, segment: str, bad: Bad, appends: list[Append]
) -> JournalDamaged:
    """What a damaged stretch named, what of it is on disk, and whether the event log
    still holds its events."""
    messages, lost = [], []
    for handle, mail_id in dict.fromkeys(_MESSAGE.findall(bad.data)):
        h, i = handle.decode(), mail_id.decode()
        messages.append(f"{h}/{i}")
        box = os.path.join(root, "mail", h)
        if not any(os.path.lexists(os.path.join(box, sub, i + ".md")) for sub in ("inbox", "read")):
            lost.append(f"{h}/{i}")
    events = sorted({int(s) for s in _EVENT.findall(bad.data)})
    in_log = _log_holds(log_fd, events, appends)
    held = f"{len(messages)} message(s), "
    if events:
        where = "in events.jsonl" if in_log else "lost from events.jsonl"
        held += f"events seq {events[0]}-{events[-1]} ({where})"
    else:
        held += "no event that could be read"
    if lost:
        held += f"; {len(lost)} message file(s) never written: {', '.join(lost)}"
    return JournalDamaged(
        segment=segment,
        offset=bad.offset,
        size=bad.size,
        held=held,
        messages=messages,
        lost=lost,
        events=events,
        in_log=in_log,
    )


def _log_holds(log_fd: int, events: list[int], appends: list[Append]) -> bool:
    """Whether the log between the committed batches around these events holds whole
    lines; if not, that stretch is blanked into one skipped line."""
    if not events:
        return True
    lo = max((a.offset + len(a.data) for a in appends if _first_seq(a) < events[0]), default=None)
    hi = min((a.offset for a in appends if _first_seq(a) > events[-1]), default=None)
    if lo is None:
        return True  # nothing committed before it was read: nothing to compare against
    if hi is None:
        hi = os.fstat(log_fd).st_size
    if hi <= lo:
        return False  # no room was left for them: they never reached the log
    region = os.pread(log_fd, hi - lo, lo)
    whole = region.endswith(b"\n") and b"\0" not in region
    seqs = {s for s in map(seq_of, region.split(b"\n")) if s is not None}
    if whole and set(events) <= seqs:
        return True
    if not whole:
        write_all(log_fd, b" " * (len(region) - 1) + b"\n", lo)
    return False


def _first_seq(a: Append) -> int:
    return seq_of(a.data) or 0


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
        replace_file(p, e.data, os.path.join(root, REPLAY_TMP))  # torn: rewritten there
        return 1
    os.makedirs(os.path.dirname(e.path), 0o700, exist_ok=True)
    replace_file(e.path, e.data, os.path.join(root, REPLAY_TMP))
    return 1


def _drop(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        drop(fd, preallocated=os.fstat(fd).st_size >= SEGMENT_BYTES)
    finally:
        os.close(fd)
