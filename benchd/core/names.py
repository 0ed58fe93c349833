"""Names and the time they carry: handles, message ids (time-sortable: `IdClock`) and
references to them (a message that crossed nodes is named everywhere by the id its
sending node gave it, `<id>@<node>`, kept in a received copy's `origin`; `in-reply-to`
is bare within a node for mail sent from it, always full between nodes), the daemon's
one wall clock, and the port every layer logs through (`Log`).

Monotonic time is trio's, read in the task that acts on it, so a test under
`trio.testing.MockClock` drives every timing rule and every sleep together. Wall time
(what is written or shown) comes from one injected `WallClock`; `SystemWallClock` is the
one place in benchd that reads the system's clocks (tests/unit/test_clock_reads.py).
"""

import calendar
import re
import time
from typing import Protocol

# The handle rule is bench_wire's (the bridge, which never imports benchd, needs it too).
from bench_wire.addresses import HANDLE_RE as HANDLE_RE
from bench_wire.addresses import check_handle as check_handle
from bench_wire.addresses import is_handle as is_handle
from bench_wire.addresses import split_address as split_address
from bench_wire.errors import WireError

OPERATOR = "operator"
# 20261130T045611.123Z-0001: UTC time to the millisecond, then a counter within that ms.
MAIL_ID_RE = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9]{4}")


def check_mail_id(value: object) -> str:
    if not isinstance(value, str) or MAIL_ID_RE.fullmatch(value) is None:
        raise WireError(
            "bad-id", f"{value!r} is not a message id (they look like 20261130T045611.123Z-0001)"
        )
    return value


def format_ms(ms: int) -> str:
    """UTC ISO 8601 with milliseconds, e.g. 2026-11-30T04:56:11.123Z."""
    secs, milli = divmod(ms, 1000)
    return f"{_stamps(secs)[1]}.{milli:03d}Z"


_stamp_cache: tuple[int, str, str] = (-1, "", "")


def _stamps(secs: int) -> tuple[str, str]:
    """(20261130T045611, 2026-11-30T04:56:11) for a second: every send formats both, and
    sends come many to the second, so the last second's are kept."""
    global _stamp_cache
    if _stamp_cache[0] != secs:
        t = time.gmtime(secs)
        _stamp_cache = (
            secs,
            time.strftime("%Y%m%dT%H%M%S", t),
            time.strftime("%Y-%m-%dT%H:%M:%S", t),
        )
    return _stamp_cache[1], _stamp_cache[2]


class IdClock:
    """Hands out unique ids that sort by send time, also across restarts: if the wall
    clock steps back or a millisecond's 9999 ids are used up, time is borrowed from the
    future. `last` seeds it from the newest id already on disk."""

    def __init__(self, last: str | None = None):
        self._ms = 0
        self._n = 0
        self.resume(last)

    def resume(self, last: str | None) -> None:
        """Go on after `last` (the newest id on disk) unless this clock is past it."""
        at = id_ms(last) if last else None
        if last and at is not None and (at, int(last[-4:])) > (self._ms, self._n):
            self._ms, self._n = at, int(last[-4:])

    def next(self, now_ms: int) -> tuple[str, int]:
        if now_ms > self._ms:
            self._ms, self._n = now_ms, 1
        elif self._n < 9999:
            self._n += 1
        else:
            self._ms, self._n = self._ms + 1, 1
        secs, milli = divmod(self._ms, 1000)
        return f"{_stamps(secs)[0]}.{milli:03d}Z-{self._n:04d}", self._ms


def id_ms(mail_id: str) -> int | None:
    """The send time an id carries (20261130T045611.123Z-0001), in wall ms."""
    if MAIL_ID_RE.fullmatch(mail_id) is None:
        return None
    t = time.strptime(mail_id[:15], "%Y%m%dT%H%M%S")
    return calendar.timegm(t) * 1000 + int(mail_id[16:19])


def split_ref(value: object) -> tuple[str, str | None]:
    """`<id>` -> (id, None); `<id>@<node>` -> (id, node); else bad-id."""
    if isinstance(value, str):
        mail_id, at, node = value.partition("@")
        if MAIL_ID_RE.fullmatch(mail_id) and (not at or is_handle(node)):
            return mail_id, node if at else None
    raise WireError(
        "bad-id",
        f"{value!r} is not a message id (they look like 20261130T045611.123Z-0001, or "
        "20261130T045611.123Z-0001@node2 for a message as the node it was sent from named it)",
    )


def check_ref(value: object) -> str:
    mail_id, node = split_ref(value)
    return mail_id if node is None else f"{mail_id}@{node}"


def local_ref(ref: str, own: str) -> str:
    """A reference as this node writes it: a message sent from here by its bare id."""
    mail_id, node = split_ref(ref)
    return mail_id if node == own else ref


def full_ref(ref: str, own: str) -> str:
    """A reference as it crosses to another node: always with the node it names."""
    mail_id, node = split_ref(ref)
    return ref if node is not None else f"{mail_id}@{own}"


def received_ref(ref: str, origin: str, own: str) -> str:
    """A reference in mail from node `origin`, as this node writes it: a bare id there
    (from a bench that sent bare ids) names a message of `origin`."""
    return local_ref(full_ref(ref, origin), own)


def identity(mail_id: str, origin: str | None, own: str) -> str:
    """A message's identity: its origin when it was received from another node, else
    its id here with this node's name."""
    return origin or f"{mail_id}@{own}"


class Log(Protocol):
    """Events by name, with their context as keywords."""

    def info(self, event: str, **kw: object) -> None: ...

    def warning(self, event: str, **kw: object) -> None: ...

    def error(self, event: str, **kw: object) -> None: ...

    def exception(self, event: str, **kw: object) -> None: ...


class WallClock(Protocol):
    def wall_ms(self) -> int: ...


class SystemWallClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_WALL: WallClock = SystemWallClock()
