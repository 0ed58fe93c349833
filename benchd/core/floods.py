"""Floods: how often a refusal is written down. Pure (no I/O; the caller gives the time).

Every refusal a caller can bring about at will (a send past a limit, a wait that would
deadlock, a spawn past a delegation limit, a connection past a budget) is answered
every time, but logged (benchd.log and its event) as one line per flood and source:
the first refusal of a source is logged at once, with `count` 1; the next ones within
`every` seconds (`--flood-interval`) are only counted, and the first one after that is
logged with `count` = the refusals since the source's previous line, itself included.
So one source costs the logs at most one line per `every` seconds however fast it
loops (60 a hour at the default 60 s), and the counts add up to what was refused,
except the refusals after a source's last line (until its next one).

The opening of a wait (`wait/opened`) is written down the same way: a caller can loop
on it as fast as on a refusal (a wait of 1 ms, again and again).

A source is whatever the caller names: (code, sender), (code, mailbox), a tree's
budget, a wait's caller and target. At most `sources` are remembered; past that the one logged longest ago is
forgotten (its next refusal is logged at once: forgetting never hides one).
"""

from collections.abc import Hashable


class Floods:
    def __init__(self, every: float = 60.0, sources: int = 4096) -> None:
        self.every = every
        self.sources = sources
        # source -> [time of its last line, refusals since then (not logged yet)];
        # in the order of their last lines (oldest first), re-inserted on each line.
        self.seen: dict[Hashable, list[float]] = {}

    def count(self, source: Hashable, now: float) -> int:
        """One more refusal (or other loopable event) from `source`: the count to log it
        with, or 0 (counted only)."""
        got = self.seen.get(source)
        if got is not None and now - got[0] < self.every:
            got[1] += 1
            return 0
        count = 1 if got is None else int(got[1]) + 1
        if got is not None:
            del self.seen[source]
        elif len(self.seen) >= self.sources:
            del self.seen[next(iter(self.seen))]
        self.seen[source] = [now, 0]
        return count
