"""Daemon options, defined once: `benchd` parses them, `bench up` / `bench daemon` forward
them. Each has a flag, an environment variable and a default (documented in docs/cli.md).
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
        "--tree-connections",
        "BENCH_TREE_CONNECTIONS",
        int,
        64,
        "concurrent connections one tree of sessions (a session and the jobs below it) may "
        "hold; more are refused with too-many-connections",
    ),
    (
        "--flood-interval",
        "BENCH_FLOOD_INTERVAL",
        float,
        60.0,
        "seconds between two logged lines (limit/hit, wait/refused, job/limited) of one "
        "flood of refusals from one source; the refusals between are counted",
    ),
    (
        "--send-burst",
        "BENCH_SEND_BURST",
        int,
        200,
        "sends a tree of sessions (a session and the jobs below it) may make at once (its "
        "send bucket); more are refused with rate-limited",
    ),
    (
        "--send-rate",
        "BENCH_SEND_RATE",
        float,
        20.0,
        "sends per second returned to a tree's send bucket",
    ),
    (
        "--operator-send-burst",
        "BENCH_OPERATOR_SEND_BURST",
        int,
        2000,
        "sends the operator may make at once (its send bucket)",
    ),
    (
        "--operator-send-rate",
        "BENCH_OPERATOR_SEND_RATE",
        float,
        200.0,
        "sends per second returned to the operator's send bucket",
    ),
    (
        "--mailbox-messages",
        "BENCH_MAILBOX_MESSAGES",
        int,
        10_000,
        "unread messages one mailbox may hold; more are refused with mailbox-full",
    ),
    (
        "--mailbox-bytes",
        "BENCH_MAILBOX_BYTES",
        int,
        256 * 1024 * 1024,
        "bytes of unread bodies one mailbox may hold; more are refused with mailbox-full",
    ),
    (
        "--reply-to-max",
        "BENCH_REPLY_TO_MAX",
        int,
        16,
        "reply-to addresses one message may carry; more are refused with too-many-recipients",
    ),
    (
        "--idle-timeout",
        "BENCH_IDLE_TIMEOUT",
        float,
        60.0,
        "seconds a connection may wait with no request in flight and no stream open",
    ),
    (
        "--max-children",
        "BENCH_MAX_CHILDREN",
        int,
        4,
        "unsettled jobs one session may have started; more are refused with too-many-children",
    ),
    (
        "--max-depth",
        "BENCH_MAX_DEPTH",
        int,
        3,
        "how deep sessions may delegate (a child of an operator's session is at depth 1)",
    ),
    (
        "--spawn-rate",
        "BENCH_SPAWN_RATE",
        int,
        30,
        "jobs one tree of sessions (a session and the jobs below it) may start per hour; "
        "more are refused with rate-limited",
    ),
    (
        "--tree-bytes",
        "BENCH_TREE_BYTES",
        int,
        64 * 1024 * 1024,
        "bytes of mail one tree of sessions may send per hour; more are refused with rate-limited",
    ),
    (
        "--tree-mailboxes",
        "BENCH_TREE_MAILBOXES",
        int,
        100,
        "new mailboxes one tree of sessions may make per hour (mail to a new handle, a job's "
        "child); more are refused with rate-limited",
    ),
    (
        "--stall-after",
        "BENCH_STALL_AFTER",
        float,
        600.0,
        "seconds a job's child may show no output, without a report, before it is stalled "
        "(0: never)",
    ),
    (
        "--max-deadline",
        "BENCH_MAX_DEADLINE",
        float,
        7 * 86400.0,
        "the longest --deadline (and per-spawn --stall-after) a spawn may ask for, in seconds",
    ),
    (
        "--exited-kept",
        "BENCH_EXITED_KEPT",
        int,
        200,
        "exited sessions remembered (on disk, across restarts) for ps -a and tail",
    ),
    (
        "--kept-scrollback",
        "BENCH_KEPT_SCROLLBACK",
        int,
        65536,
        "bytes of an exited session's output kept on disk for bench tail",
    ),
    (
        "--disk-reserve",
        "BENCH_DISK_RESERVE",
        int,
        64 << 20,
        "bytes of free space the journal never takes to preallocate its segments "
        "(below it they grow with their records)",
    ),
    (
        "--event-log-bytes",
        "BENCH_EVENT_LOG_BYTES",
        int,
        128 << 20,
        "bytes events.jsonl may hold before it is rotated to events.1.jsonl (the one before "
        "is dropped): the log takes at most about twice this on disk",
    ),
    (
        "--session-waits",
        "BENCH_SESSION_WAITS",
        int,
        4,
        "waits (mail wait, job wait) one caller may have open; more are refused with too-many-waits",
    ),
    (
        "--max-waits",
        "BENCH_MAX_WAITS",
        int,
        256,
        "waits open at once in all; more are refused with too-many-waits",
    ),
    (
        "--wait-max",
        "BENCH_WAIT_MAX",
        float,
        3600.0,
        "the longest timeout a wait may ask for, in seconds",
    ),
    (
        "--agent-reports",
        "BENCH_AGENT_REPORTS",
        int,
        20,
        "hook reports (bench hook) a session's agent may send a second (a burst of ten "
        "seconds' worth); more are refused with rate-limited",
    ),
    (
        "--approval-wait",
        "BENCH_APPROVAL_WAIT",
        float,
        600.0,
        "seconds an agent's approval hook waits for bench approve/deny before its own dialog asks",
    ),
]


# Each option's range, declared beside the options: (least, most, unit). A value outside
# it is refused by `bench up` (flag or team file) and by benchd alike, with the bound
# named, so no file or command line lifts a limit past what the daemon was built to bear
# (a spawn rate of 1e9, a deadline that overflows a clock) or turns a protection off
# (`--operator-reserve 0`). The unit says how a bound is shown: "s" as a duration.
# Every option in DAEMON_OPTIONS has a row here (tests/unit/test_config.py checks).
DAY = 86400.0
BOUNDS: dict[str, tuple[float, float, str]] = {
    "--idle-gate": (0, 3600, "s"),
    "--paste-settle": (0, 60, "s"),
    "--wake-burst": (0, 1000, ""),
    "--wake-refill": (0.001, DAY, "s"),
    "--enter-retries": (0, 20, ""),
    "--enter-check": (0, 60, "s"),
    "--retry-base": (0, 3600, "s"),
    "--max-connections": (1, 8192, ""),
    "--session-connections": (1, 8192, ""),
    "--operator-connections": (1, 8192, ""),
    # 0 would let sessions take every connection and lock the operator out.
    "--operator-reserve": (1, 8192, ""),
    "--send-burst": (1, 100_000, ""),
    "--send-rate": (0.0001, 10_000, ""),
    "--operator-send-burst": (1, 1_000_000, ""),
    "--operator-send-rate": (0.0001, 100_000, ""),
    "--mailbox-messages": (1, 1_000_000, ""),
    "--mailbox-bytes": (1, 1 << 34, "B"),
    "--reply-to-max": (0, 256, ""),
    "--idle-timeout": (0.001, DAY, "s"),
    "--max-children": (0, 64, ""),
    "--max-depth": (0, 16, ""),
    "--spawn-rate": (0, 10_000, ""),
    "--tree-bytes": (0, 1 << 34, "B"),
    "--tree-mailboxes": (0, 100_000, ""),
    "--stall-after": (0, 30 * DAY, "s"),
    "--max-deadline": (0.001, 365 * DAY, "s"),
    "--exited-kept": (0, 100_000, ""),
    "--kept-scrollback": (0, 64 << 20, "B"),
    "--disk-reserve": (0, 1 << 40, "B"),
    "--session-waits": (1, 1024, ""),
    "--max-waits": (1, 65_536, ""),
    "--wait-max": (0.001, 30 * DAY, "s"),
    "--flood-interval": (0.001, DAY, "s"),
    "--tree-connections": (1, 8192, ""),
    # A smaller bound would rotate the log at nearly every batch.
    "--event-log-bytes": (64 * 1024, 1 << 40, "B"),
    "--agent-reports": (1, 10_000, ""),
    "--approval-wait": (0.001, DAY, "s"),
}


def option_dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def seconds_text(seconds: float) -> str:
    """A duration as a user would type it: the largest unit it is a whole number of
    (`7d`, `30d`, `90m`, `45s`), else seconds (`1.5s`): never `2.592e+06s`."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0 and seconds / size < 1e15:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def value_text(value: float, unit: str) -> str:
    """An option's value as its unit shows it."""
    if unit == "s":
        return seconds_text(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def option_problem(flag: str, value: float) -> str | None:
    """Why a daemon option's value is refused, or None (checked by benchd and by
    `bench up`, so a bad value is a usage error before any daemon starts). NaN is
    outside every range."""
    low, high, unit = BOUNDS.get(flag, (0, float("inf"), ""))
    if low <= value <= high:
        return None
    got = value_text(value, unit)
    if value != value:  # NaN
        span = f"{value_text(low, unit)} to {value_text(high, unit)}"
        return f"{flag} must be a number from {span} (got {got})"
    if value < 0 <= low:
        return f"{flag} must not be negative (got {got})"
    if not value >= low:
        least = "be positive" if 0 < low < 1 else f"be at least {value_text(low, unit)}"
        return f"{flag} must {least} (got {got})"
    return f"{flag} must be at most {value_text(high, unit)} (got {got})"
