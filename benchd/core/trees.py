"""Budgets per tree of sessions, and delegation's limits. Pure (no I/O, no clock).

A session the operator spawned is the root of a tree; whatever its descendants do is
charged to the root's budgets (docs/limits.md), so delegating never multiplies what one
agent may do. Each budget is a sliding hour summed per minute (at most 60 numbers per
tree); a request is charged whole or refused whole.
"""

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bench_wire.errors import WireError

HOUR_S = 3600.0
SLOT_S = 60.0  # one number per minute of the hour
SWEEP_AT = 1024  # trees with a window before those idle for an hour are forgotten


class TreeMember(Protocol):
    """What is read of a session to find its tree (a benchd.runtime.roster Session)."""

    @property
    def id(self) -> str: ...

    @property
    def handle(self) -> str: ...

    @property
    def lineage(self) -> tuple[str, ...]: ...


def root_of(s: TreeMember) -> str:
    """The session id of the root of `s`'s tree (its own for a session nobody delegated:
    `lineage` holds its spawners, nearest first)."""
    return s.lineage[-1] if s.lineage else s.id


class HourWindow:
    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: collections.deque[list[float]] = collections.deque()  # [minute, amount]

    def _trim(self, now: float) -> None:
        first = now // SLOT_S - (HOUR_S / SLOT_S) + 1
        while self.slots and self.slots[0][0] < first:
            self.slots.popleft()

    def total(self, now: float) -> float:
        self._trim(now)
        return sum(amount for _, amount in self.slots)

    def add(self, now: float, amount: float) -> None:
        self._trim(now)
        minute = now // SLOT_S
        if self.slots and self.slots[-1][0] == minute:
            self.slots[-1][1] += amount
        else:
            self.slots.append([minute, amount])

    def seconds_until(self, now: float, need: float, cap: float) -> float:
        """How long until `need` more fits under `cap` (the oldest minutes leave first)."""
        self._trim(now)
        over = self.total(now) + need - cap
        for minute, amount in self.slots:
            if over <= 0:
                break
            over -= amount
            leaves = (minute + HOUR_S / SLOT_S) * SLOT_S
            if over <= 0:
                return max(0.0, leaves - now)
        return 0.0 if over <= 0 else HOUR_S


@dataclass(frozen=True)
class TreeLimits:
    bytes_per_hour: int = 64 * 1024 * 1024
    mailboxes_per_hour: int = 100


@dataclass(frozen=True)
class OverBudget:
    budget: str  # bytes or mailboxes
    spent: int  # in the last hour
    cap: int
    retry_after: float  # seconds


class TreeBudgets:
    def __init__(self, limits: TreeLimits) -> None:
        self.limits = limits
        self.bytes: dict[str, HourWindow] = {}
        self.mailboxes: dict[str, HourWindow] = {}

    def _windows(self) -> tuple[tuple[str, dict[str, HourWindow], int], ...]:
        lim = self.limits
        return (
            ("bytes", self.bytes, lim.bytes_per_hour),
            ("mailboxes", self.mailboxes, lim.mailboxes_per_hour),
        )

    def over(self, root: str, now: float, size: int, mailboxes: int) -> OverBudget | None:
        """The first budget that `size` bytes and `mailboxes` new mailboxes would pass."""
        for name, windows, cap in self._windows():
            need = size if name == "bytes" else mailboxes
            if need <= 0:
                continue
            w = windows.get(root)
            spent = 0.0 if w is None else w.total(now)
            if spent + need > cap:
                wait = HOUR_S if w is None or need > cap else w.seconds_until(now, need, cap)
                return OverBudget(name, int(spent), cap, wait)
        return None

    def spend(self, root: str, now: float, size: int, mailboxes: int) -> None:
        for name, windows, _cap in self._windows():
            if len(windows) > SWEEP_AT:
                for idle in [r for r, w in windows.items() if not w.total(now)]:
                    del windows[idle]
            amount = size if name == "bytes" else mailboxes
            w = windows.get(root)
            if w is not None and not w.total(now):
                del windows[root]  # an hour idle: forgotten (memory only for active trees)
                w = None
            if amount > 0:
                if w is None:
                    w = windows[root] = HourWindow()
                w.add(now, amount)


# Delegation: a session starting jobs of its own, within three limits counted per
# spawning session (live children, depth, spawns per hour: docs/jobs.md). The spawn
# rate is counted per tree (the window of the tree's root), so a tree churns no faster
# than one session may. Pure decisions, no I/O.


WINDOW_S = 3600.0
HANDLE_MAX = 64


@dataclass(frozen=True)
class DelegationLimits:
    children: int = 4
    depth: int = 3
    per_hour: int = 30


class Refused(WireError):
    """A limit fired: `limit` names it (children, depth, rate) and `value` its setting."""

    def __init__(self, code: str, message: str, limit: str, value: int):
        super().__init__(code, message)
        self.limit = limit
        self.value = value


class Quota:
    """What each spawning session has started: its live children and its recent spawns."""

    def __init__(self, limits: DelegationLimits):
        self.limits = limits
        self.children: dict[str, set[str]] = {}  # parent session id -> unsettled child ids
        self.spawns: dict[str, collections.deque[float]] = {}  # parent id -> spawn times

    def check(
        self, parent: str, parent_handle: str, depth: int, now: float, root: str | None = None
    ) -> None:
        """Raise `Refused` when `parent` (whose child would be at `depth`, in the tree of
        `root`: by default its own) may not spawn."""
        lim = self.limits
        if depth > lim.depth:
            raise Refused(
                "too-deep",
                f"{parent_handle}'s child would be at depth {depth}; the daemon allows "
                f"{lim.depth} (--max-depth)",
                "depth",
                lim.depth,
            )
        if len(self.children.get(parent, ())) >= lim.children:
            raise Refused(
                "too-many-children",
                f"{parent_handle} already has {lim.children} unsettled jobs (--max-children); "
                "spawn again when one has settled",
                "children",
                lim.children,
            )
        recent = self._window(parent if root is None else root, now)
        if len(recent) >= lim.per_hour:
            wait = int(recent[0] + WINDOW_S - now) + 1
            who = (
                f"{parent_handle}'s tree"
                if root in (None, parent)
                else f"the tree {parent_handle} is in"
            )
            raise Refused(
                "rate-limited",
                f"{who} has spawned {lim.per_hour} jobs in the last hour "
                f"(--spawn-rate, for a session and every job below it); the next is "
                f"allowed in {wait} s",
                "rate",
                lim.per_hour,
            )

    def _window(self, key: str, now: float) -> collections.deque[float]:
        recent = self.spawns.setdefault(key, collections.deque())
        while recent and recent[0] <= now - WINDOW_S:
            recent.popleft()
        if len(self.spawns) > SWEEP_AT:  # forget the windows idle for an hour
            for idle in [k for k, v in self.spawns.items() if not v or v[-1] <= now - WINDOW_S]:
                if idle != key:
                    del self.spawns[idle]
        return recent

    def started(self, parent: str, child: str, now: float, root: str | None = None) -> None:
        self.children.setdefault(parent, set()).add(child)
        self._window(parent if root is None else root, now).append(now)

    def settled(self, parent: str, child: str) -> None:
        kids = self.children.get(parent)
        if kids is not None:
            kids.discard(child)
            if not kids:
                del self.children[parent]


def derived_handle(parent: str, taken: Callable[[str], bool]) -> str:
    """The first fresh `<parent>.<n>` (n = 1, 2, ...), the parent's part cut so the whole
    fits in 64 characters."""
    n = 1
    while True:
        suffix = f".{n}"
        candidate = parent[: HANDLE_MAX - len(suffix)] + suffix
        if not taken(candidate):
            return candidate
        n += 1
