"""The daemon's clock, injected: every timing rule reads time from a `Clock`, so a test
can drive time instead of waiting for it (trio's `SystemClock` and `MockClock` are the
model).

Two readings, because they answer different questions:

- `now()`: monotonic seconds, for intervals inside one process (wake buckets, quiet
  times). Never jumps when the wall clock is set.
- `wall_ms()`: the wall clock in milliseconds, for times written to disk that a later
  daemon reads back (a reply's due time in the job outbox): a monotonic reading means
  nothing to another process.

Sleeping is not the clock's job: the daemon sleeps with trio, whose own clock a test
may replace (`trio.testing.MockClock`).
"""

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds (an arbitrary origin)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemClock:
    """The real clock: `time.monotonic` and `time.time_ns`."""

    def now(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class TestClock:
    """A clock that moves only when told: `advance(seconds)` moves both readings
    together, as real time would."""

    __test__ = False  # pytest: a helper, not a test class

    def __init__(self, now: float = 0.0, wall_ms: int = 1_700_000_000_000) -> None:
        self._now = now
        self._wall_ms = wall_ms

    def now(self) -> float:
        return self._now

    def wall_ms(self) -> int:
        return self._wall_ms

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds
        self._wall_ms += round(seconds * 1000)


SYSTEM_CLOCK: Clock = SystemClock()
