"""Daemon options, defined once: `benchd` parses them, `bench up` / `bench daemon` forward
them. Each has a flag, an environment variable and a default (documented in the README).
"""

# flag, env var, type, default, help
DAEMON_OPTIONS: list[tuple[str, str, type, object, str]] = [
    (
        "--idle-gate",
        "BENCH_IDLE_GATE",
        float,
        2.0,
        "seconds without output or operator input before a wake may land",
    ),
    (
        "--paste-settle",
        "BENCH_PASTE_SETTLE",
        float,
        0.2,
        "seconds between pasting the wake line and pressing Enter",
    ),
    ("--wake-burst", "BENCH_WAKE_BURST", int, 6, "wake tokens per recipient (the bucket's size)"),
    (
        "--wake-refill",
        "BENCH_WAKE_REFILL",
        float,
        60.0,
        "seconds per wake token returned to a recipient's bucket",
    ),
    (
        "--enter-retries",
        "BENCH_ENTER_RETRIES",
        int,
        3,
        "times Enter is pressed again when the screen does not change",
    ),
    (
        "--enter-check",
        "BENCH_ENTER_CHECK",
        float,
        0.5,
        "seconds to wait for the screen to change after Enter (doubles per retry)",
    ),
    (
        "--retry-base",
        "BENCH_RETRY_BASE",
        float,
        1.0,
        "seconds before a refused job reply is retried (doubles per attempt, at most 5 min)",
    ),
    (
        "--max-connections",
        "BENCH_MAX_CONNECTIONS",
        int,
        256,
        "concurrent client connections; more are refused with too-many-connections",
    ),
    (
        "--session-connections",
        "BENCH_SESSION_CONNECTIONS",
        int,
        16,
        "concurrent connections one session may hold",
    ),
    (
        "--operator-connections",
        "BENCH_OPERATOR_CONNECTIONS",
        int,
        128,
        "concurrent connections the operator may hold",
    ),
    (
        "--operator-reserve",
        "BENCH_OPERATOR_RESERVE",
        int,
        32,
        "connections of --max-connections that sessions may never take (kept for the operator)",
    ),
    (
        "--idle-timeout",
        "BENCH_IDLE_TIMEOUT",
        float,
        60.0,
        "seconds a connection may wait with no request in flight and no stream open",
    ),
    (
        "--disk-reserve",
        "BENCH_DISK_RESERVE",
        int,
        64 << 20,
        "bytes of free space the journal never takes to preallocate its segments "
        "(below it they grow with their records)",
    ),
]


def option_dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def option_problem(flag: str, value: float) -> str | None:
    """Why a daemon option's value is refused, or None (checked by benchd and by
    `bench up`, so a bad value is a usage error before any daemon starts)."""
    if value < 0:
        return f"{flag} must not be negative (got {value})"
    if flag in ("--wake-refill", "--idle-timeout") and value <= 0:
        return f"{flag} must be positive (got {value})"
    if flag in ("--max-connections", "--session-connections", "--operator-connections") and (
        value < 1
    ):
        return f"{flag} must be at least 1 (got {value})"
    return None
