"""Journal damage for the crash loop and its tests: one byte flipped in one committed
record, as a bad sector or a stray write would leave it."""

from __future__ import annotations

import os
import random

from benchd.store.journal import HEAD_BYTES, SEGMENTS, Record, read_segment


def committed_records(bench_dir: str) -> list[tuple[str, Record]]:
    """Every whole record a replay would read now, (segment, record), in seq order."""
    out = []
    for name in SEGMENTS:
        try:
            with open(os.path.join(bench_dir, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        good, _bad = read_segment(data)
        out += [(name, r) for r in good]
    return sorted(out, key=lambda x: x[1].seq)


def flip_byte(bench_dir: str, segment: str, at: int, bit: int = 0) -> None:
    with open(os.path.join(bench_dir, segment), "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ (1 << bit)]))
        f.flush()
        os.fsync(f.fileno())


def flip_random(bench_dir: str, rng: random.Random) -> str | None:
    """Flip a random bit of a random byte (head or payload) of a random committed
    record; what was hit, or None when the journal holds no record."""
    recs = committed_records(bench_dir)
    if not recs:
        return None
    segment, rec = rng.choice(recs)
    at = rec.offset + rng.randrange(HEAD_BYTES + len(rec.payload))
    flip_byte(bench_dir, segment, at, rng.randrange(8))
    part = "head" if at - rec.offset < HEAD_BYTES else "payload"
    return f"{segment} record seq {rec.seq} at {rec.offset}: byte {at} ({part})"
