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


def option_dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def option_problem(flag: str, value: float) -> str | None:
    """Why a daemon option's value is refused, or None (checked by benchd and by
    `bench up`, so a bad value is a usage error before any daemon starts)."""
    if value < 0:
        return f"{flag} must not be negative (got {value})"
    if flag in (
        "--wake-refill",
        "--idle-timeout",
        "--send-rate",
        "--operator-send-rate",
        "--max-deadline",
        "--wait-max",
        "--agent-reports",
        "--approval-wait",
    ) and (value <= 0):
        return f"{flag} must be positive (got {value})"
    if flag in (
        "--max-connections",
        "--session-connections",
        "--operator-connections",
        "--send-burst",
        "--operator-send-burst",
        "--mailbox-messages",
        "--mailbox-bytes",
        "--session-waits",
        "--max-waits",
    ) and (value < 1):
        return f"{flag} must be at least 1 (got {value})"
    return None
