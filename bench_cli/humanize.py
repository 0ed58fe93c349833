"""Numbers and names as people read them, one form everywhere: the CLI's text and the
dashboard show the same `10m` for the same idle time and `SIGHUP` for the same signal.
--json keeps the exact values (milliseconds, signal numbers).

No imports at module level: output on the fast path may use it.
"""


def duration(seconds: float) -> str:
    """An idle time or an age, to its largest whole unit: 42s, 10m, 2h, 3d (never
    negative: a clock read a moment apart is not a time in the future)."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# The longest duration anything takes (ten years): past it a number is a typo or an
# attack (`1e23d` overflows a clock), refused here rather than deep in the daemon.
LONGEST = 3650 * 86400.0


def parse_duration(text: str, most: float = LONGEST) -> float:
    """`90s`, `10m`, `1.5h`, `2d` in seconds (the form `duration` prints, and `bench
    events --since` reads), at most `most`; ValueError with a sentence for anything else."""
    t = text.strip()
    unit = t[-1:]
    try:
        if unit not in _UNIT_S:
            raise ValueError(t)
        value = float(t[:-1])
        if not 0 <= value < float("inf"):  # also refuses nan
            raise ValueError(t)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a duration: give a number and a unit, s m h or d (90s, 10m, 1h)"
        ) from None
    seconds = value * _UNIT_S[unit]
    if seconds > most:
        raise ValueError(f"{text!r} is out of range: at most {exact(most)}")
    return seconds


def exact(seconds: float) -> str:
    """A duration as it would be typed, exactly: `30d`, `7d`, `90m`, `1.5s` (never
    `2.592e+06s`; `duration` rounds down to one unit instead, for ages and idle times)."""
    from bench_wire.config import seconds_text  # the daemon's messages use it too

    return seconds_text(seconds)


def count(n: int, one: str, many: str | None = None) -> str:
    """`1 match`, `2 matches`, `0 sessions`."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def signal_name(number: int) -> str:
    """SIGHUP for 1; a number Linux does not name (or a real-time signal) as SIG<n>."""
    import signal  # loads enum: only here, never on the fast path

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"
