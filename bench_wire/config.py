"""Daemon options, each said once: a field of `DaemonOptions` (ARCHITECTURE.md, "Where
to add a daemon option", lists what derives from it).

A dataclass rather than records beside a typed config: mypy strict sees
`config.send_rate` as a float only if a class declares the field, and a second class
would say every name and default again. The field's `metadata` holds the rest, read back
as `Option` records by the code that walks every option.
"""

import dataclasses
from typing import Any, TypeVar, cast

N = TypeVar("N", int, float)

DAY = 86400.0
MiB = 1 << 20


def option(default: N, low: float, high: float, unit: str, help: str, hello: str = "") -> N:
    """One option's field: its default, its range (least, most), the unit its values are
    shown in (`Option.unit`), its help, and where hello reports it (`Option.hello`)."""
    meta = {"range": (low, high, unit), "help": help, "hello": hello}
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DaemonOptions:
    """Every daemon option with its default; `DaemonConfig` is this plus benchd's own.

    Ranges: a value outside one would lift a limit past what the daemon was built to
    bear (a spawn rate of 1e9, a deadline that overflows a clock) or turn a protection
    off (`--operator-reserve 0`)."""

    # Unformatted: an option a few lines (default, range, help, hello), read as a table.
    # fmt: off
    idle_gate: float = option(
        2.0, 0, 3600, "s",
        "seconds without output or operator input before a wake may land",
        "reactor.idle_gate",
    )
    paste_settle: float = option(
        0.2, 0, 60, "s",
        "seconds between pasting the wake line and pressing Enter",
        "reactor.paste_settle",
    )
    wake_burst: int = option(
        6, 0, 1000, "",
        "wake tokens per recipient (the bucket's size)",
        "reactor.wake_burst",
    )
    wake_refill: float = option(
        60.0, 0.001, DAY, "s",
        "seconds per wake token returned to a recipient's bucket",
        "reactor.wake_refill",
    )
    enter_check: float = option(
        0.5, 0, 60, "s",
        "seconds to wait for the screen to change after Enter (doubles per retry)",
        "reactor.enter_check",
    )
    retry_base: float = option(
        1.0, 0, 3600, "s",
        "seconds before a refused job reply is retried (doubles per attempt, at most 5 min)",
        "reactor.retry_base",
    )
    max_connections: int = option(
        256, 1, 8192, "",
        "concurrent client connections; more are refused with too-many-connections",
        "caps.connections",
    )
    session_connections: int = option(
        16, 1, 8192, "",
        "concurrent connections one session may hold",
    )
    # At least 1: 0 would let sessions take every connection and lock the operator out.
    operator_reserve: int = option(
        32, 1, 8192, "",
        "connections of --max-connections that sessions may never take (kept for the "
        "operator: sessions together hold at most the rest)",
    )
    tree_connections: int = option(
        64, 1, 8192, "",
        "concurrent connections one tree of sessions (a session and the jobs below it) may "
        "hold; more are refused with too-many-connections",
        "caps.tree_connections",
    )
    flood_interval: float = option(
        60.0, 0.001, DAY, "s",
        "seconds between two logged lines (limit/hit, wait/refused, job/limited) of one "
        "flood of refusals from one source; the refusals between are counted",
    )
    send_burst: int = option(
        200, 1, 100_000, "",
        "sends a tree of sessions (a session and the jobs below it) may make at once (its "
        "send bucket); more are refused with rate-limited",
        "caps.send_burst",
    )
    send_rate: float = option(
        20.0, 0.0001, 10_000, "",
        "sends per second returned to a tree's send bucket",
        "caps.send_rate",
    )
    operator_send_burst: int = option(
        2000, 1, 1_000_000, "",
        "sends the operator may make at once (its send bucket)",
        "caps.operator_send_burst",
    )
    operator_send_rate: float = option(
        200.0, 0.0001, 100_000, "",
        "sends per second returned to the operator's send bucket",
        "caps.operator_send_rate",
    )
    mailbox_messages: int = option(
        10_000, 1, 1_000_000, "",
        "unread messages one mailbox may hold; more are refused with mailbox-full",
        "caps.mailbox_messages",
    )
    mailbox_bytes: int = option(
        256 * MiB, 1, 1 << 34, "B",
        "bytes of unread bodies one mailbox may hold; more are refused with mailbox-full",
        "caps.mailbox_bytes",
    )
    reply_to_max: int = option(
        16, 0, 256, "",
        "reply-to addresses one message may carry; more are refused with too-many-recipients",
        "caps.reply_to_max",
    )
    idle_timeout: float = option(
        60.0, 0.001, DAY, "s",
        "seconds a connection may wait with no request in flight and no stream open "
        "(then idle-timeout; checked every tenth of it, at most every 5 s)",
    )
    max_children: int = option(
        4, 0, 64, "",
        "unsettled jobs one session may have started; more are refused with too-many-children",
        "caps.max_children",
    )
    max_depth: int = option(
        3, 0, 16, "",
        "how deep sessions may delegate (a child of an operator's session is at depth 1)",
        "caps.max_depth",
    )
    spawn_rate: int = option(
        30, 0, 10_000, "",
        "jobs one tree of sessions (a session and the jobs below it) may start per hour; "
        "more are refused with rate-limited",
        "caps.spawn_rate",
    )
    tree_bytes: int = option(
        64 * MiB, 0, 1 << 34, "B",
        "bytes of mail one tree of sessions may send per hour; more are refused with rate-limited",
        "caps.tree_bytes",
    )
    tree_mailboxes: int = option(
        100, 0, 100_000, "",
        "new mailboxes one tree of sessions may make per hour (mail to a new handle, a job's "
        "child); more are refused with rate-limited",
        "caps.tree_mailboxes",
    )
    stall_after: float = option(
        600.0, 0, 30 * DAY, "s",
        "seconds a job's child may show no output, without a report, before it is stalled "
        "and its reply-to addresses are mailed (0: never; bench spawn --stall-after per job)",
    )
    max_deadline: float = option(
        7 * DAY, 0.001, 365 * DAY, "s",
        "the longest --deadline (and per-spawn --stall-after) a spawn may ask for, in seconds",
    )
    kept_scrollback: int = option(
        65536, 0, 64 * MiB, "B",
        "bytes of an exited session's output kept on disk for bench tail",
        "caps.kept_scrollback_bytes",
    )
    # At least 64 KiB: a smaller log would be rotated at nearly every batch.
    event_log_bytes: int = option(
        128 * MiB, 64 * 1024, 1 << 40, "B",
        "bytes events.jsonl may hold before it is rotated to events.1.jsonl (the one before "
        "is dropped): the log takes at most about twice this on disk",
    )
    spare_files: int = option(
        128, 0, 100_000, "",
        "empty files kept ready in BENCH_DIR/spare/ so that a send opens one instead of "
        "creating a file on the event loop; 0 keeps none (each send makes its own)",
    )
    session_waits: int = option(
        4, 1, 1024, "",
        "waits (mail wait, job wait) one caller may have open; more are refused with "
        "too-many-waits",
    )
    agent_reports: int = option(
        20, 1, 10_000, "",
        "hook reports (bench hook) a session's agent may send a second (a burst of ten "
        "seconds' worth); more are refused with rate-limited",
    )
    approval_wait: float = option(
        600.0, 0.001, DAY, "s",
        "seconds an agent's approval hook waits for bench approve/deny before its own dialog asks",
    )
    # fmt: on


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    """One daemon option as the code that walks them all reads it (from its field)."""

    dest: str  # the field's (and argparse's, and click's) name: send_rate
    type: type[int] | type[float]
    default: int | float
    low: float
    high: float
    unit: str  # "s": a duration, "B": bytes, "": a count or a rate
    help: str
    hello: str  # where hello reports it: "caps.send_rate"; "" if it does not

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def key(self) -> str:
        """Its key in a team file's [daemon] table."""
        return self.dest.replace("_", "-")

    @property
    def env(self) -> str:
        return "BENCH_" + self.dest.upper()


def _option(f: "dataclasses.Field[Any]") -> Option:
    low, high, unit = f.metadata["range"]
    if f.type not in (int, float) or type(f.default) is not f.type:
        raise TypeError(f"option {f.name}: an int or a float, its default of its type")
    typ = cast(type[int] | type[float], f.type)
    return Option(f.name, typ, f.default, low, high, unit, f.metadata["help"], f.metadata["hello"])


OPTIONS: tuple[Option, ...] = tuple(_option(f) for f in dataclasses.fields(DaemonOptions))
BY_FLAG: dict[str, Option] = {o.flag: o for o in OPTIONS}


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
    """Why a daemon option's value is refused, or None (checked by benchd and by `bench
    up`, before any daemon starts). NaN is outside every range."""
    o = BY_FLAG.get(flag)
    low, high, unit = (o.low, o.high, o.unit) if o else (0, float("inf"), "")
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
