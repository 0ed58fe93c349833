"""A clock a test moves by hand, for benchd's sync objects read outside a trio run (the
index's commit timing, the journal's checkpoint age: their `now`) and for its wall clock
(`wall_ms`, a `benchd.core.names.WallClock`). Code that runs under trio is driven by
`trio.testing.MockClock` instead, which moves trio.sleep along with the readings."""


class TestClock:
    """Moves only when told: `advance(seconds)` moves both readings together, as real
    time would."""

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


def still() -> float:
    """A monotonic clock that never moves: the `now` of a sync object (the index, the
    journal) used outside a trio run by a test that does not look at its timing."""
    return 0.0
