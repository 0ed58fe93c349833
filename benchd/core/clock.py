"""The daemon's time: one monotonic clock, trio's, and one wall clock, injected.

- **Monotonic time** (intervals inside one run: wake buckets, the idle gate, quiet
  times, the delegation quota, deadlines and stalls, the idle reaper, the index's
  commit timing, the journal's checkpoint age) is trio's: `trio.current_time()`, read
  in the trio task that acts on it. The daemon sleeps on that same clock, so a reading
  and a sleep always agree, and a test that runs the daemon's objects under
  `trio.testing.MockClock` drives every timing rule and every sleep together. A reading
  means nothing outside its run (trio's clock has an arbitrary origin): nothing
  monotonic is written to disk. The store's sync objects (the index, the journal) take
  the reading as a callable, `trio.current_time` unless a test gives its own.
- **Wall time** (what is written to disk or shown to people and read back by another
  process: event times, mail ids, a reply's due time, a deadline's time, a node's last
  heartbeat, an exited session's end) comes from one `WallClock`, made by the daemon
  and passed to the services that stamp times.

This module is the one place in benchd that reads the system's clocks;
tests/unit/test_clock_reads.py fails if `time.time()`, `time.monotonic()` or their
kind appear anywhere else in benchd. (The kernel's boot clock that pins a peer's
process, benchd.runtime.placement, is a process identity, not a time bench keeps.)
"""

import time
from typing import Protocol


class WallClock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemWallClock:
    """The real wall clock (`time.time_ns`)."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_WALL: WallClock = SystemWallClock()
