"""Delegation: a session starting jobs of its own. Pure decisions, no I/O.

A session (not the operator) may spawn jobs, within three limits counted per spawning
session:

* live children (`--max-children`, default 4, code `too-many-children`): jobs it started
  that have not settled yet; a child counts from its spawn until its job settles;
* depth (`--max-depth`, default 3, code `too-deep`): how many sessions stand above the
  new child (an operator-spawned session is at depth 0, its child at depth 1, ...);
* spawns per hour (`--spawn-rate`, default 30, code `rate-limited`): accepted spawns
  in the last 3600 seconds (a sliding window; refused attempts cost nothing).

A child's handle must be fresh: no live session holds it and no mailbox exists for it.
Without `--name` it is derived from the spawner's: `alice.1`, `alice.2`, ... the lowest
number that is fresh (cut to fit 64 characters).
"""

import collections
from collections.abc import Callable
from dataclasses import dataclass

from bench_wire.errors import WireError

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

    def live_children(self, parent: str) -> int:
        return len(self.children.get(parent, ()))

    def check(self, parent: str, parent_handle: str, depth: int, now: float) -> None:
        """Raise `Refused` when `parent` (whose child would be at `depth`) may not spawn."""
        lim = self.limits
        if depth > lim.depth:
            raise Refused(
                "too-deep",
                f"{parent_handle}'s child would be at depth {depth}; the daemon allows "
                f"{lim.depth} (--max-depth)",
                "depth",
                lim.depth,
            )
        if self.live_children(parent) >= lim.children:
            raise Refused(
                "too-many-children",
                f"{parent_handle} already has {lim.children} unsettled jobs (--max-children); "
                "spawn again when one has settled",
                "children",
                lim.children,
            )
        recent = self._window(parent, now)
        if len(recent) >= lim.per_hour:
            wait = int(recent[0] + WINDOW_S - now) + 1
            raise Refused(
                "rate-limited",
                f"{parent_handle} has spawned {lim.per_hour} jobs in the last hour "
                f"(--spawn-rate); the next is allowed in {wait} s",
                "rate",
                lim.per_hour,
            )

    def _window(self, parent: str, now: float) -> collections.deque[float]:
        recent = self.spawns.setdefault(parent, collections.deque())
        while recent and recent[0] <= now - WINDOW_S:
            recent.popleft()
        return recent

    def started(self, parent: str, child: str, now: float) -> None:
        self.children.setdefault(parent, set()).add(child)
        self._window(parent, now).append(now)

    def settled(self, parent: str, child: str) -> None:
        kids = self.children.get(parent)
        if kids is not None:
            kids.discard(child)
            if not kids:
                del self.children[parent]

    def forget(self, parent: str) -> None:
        """The parent itself has ended: nothing it started needs its rate window."""
        self.spawns.pop(parent, None)


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
