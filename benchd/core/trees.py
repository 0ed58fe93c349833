"""Budgets per tree of sessions. Pure (no I/O, no clock).

A session the operator spawned is the root of a tree; the jobs it delegates, and theirs,
are its descendants. Whatever a descendant does is charged to the root's budgets, so
delegating never multiplies what one agent may do: the sends of its send bucket
(benchd.core.limits), the spawns of --spawn-rate (benchd.core.delegation), and two
budgets an hour kept here:

- bytes of mail sent (`--tree-bytes`): the bodies of its sends, replies and task mail,
  to any mailboxes;
- new mailboxes made (`--tree-mailboxes`): mail to a handle with no mailbox and no live
  session makes one, and so does every job spawned (its child's mailbox).

Each budget is a sliding hour summed per minute (at most 60 numbers per tree, whatever
the traffic). A request is checked against all of them before anything is spent: it is
charged whole or refused whole.
"""

import collections
from dataclasses import dataclass
from typing import Protocol

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
    """What was spent in the last hour, in per-minute slots."""

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
    """The hourly budgets of every tree, by its root's session id."""

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
