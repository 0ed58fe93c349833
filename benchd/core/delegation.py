"""Delegation: a session starting jobs of its own. Pure decisions, no I/O.

A session (not the operator) may spawn jobs, within three limits counted per spawning
session:

* live children (`--max-children`, default 4, code `too-many-children`): jobs it started
  that have not settled yet; a child counts from its spawn until its job settles;
* depth (`--max-depth`, default 3, code `too-deep`): how many sessions stand above the
  new child (an operator-spawned session is at depth 0, its child at depth 1, ...);
* spawns per hour (`--spawn-rate`, default 30, code `rate-limited`): accepted spawns
  in the last 3600 seconds (a sliding window; refused attempts cost nothing), counted
  per tree: every job below a session spawns from the window of the tree's root
  (benchd.core.trees), so a tree churns no faster than one session may.

A child's handle must be fresh: no live session holds it and no mailbox exists for it.
Without `--name` it is derived from the spawner's: `alice.1`, `alice.2`, ... the lowest
number that is fresh (cut to fit 64 characters).
"""

import collections
from collections.abc import Callable
from dataclasses import dataclass

from bench_wire.errors import WireError

WINDOW_S = 3600.0
SWEEP_AT = 1024  # spawn windows kept before those idle for an hour are forgotten
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
        if self.live_children(parent) >= lim.children:
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
