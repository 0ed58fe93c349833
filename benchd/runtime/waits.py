"""Waits: callers blocked until mail (or a job's settlement) arrives, and the graph of who
waits on whom, so a wait that would close a cycle is refused (`would-deadlock`).
"""

from collections.abc import Callable

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.limits import Floods
from benchd.runtime.committer import EventOp, Op


def _now() -> float:
    try:
        return trio.current_time()
    except RuntimeError:
        return 0.0  # no trio run (a unit test)


class Waiter:
    """One open wait: its caller, the handle it waits on (or None), and its arrivals."""

    __slots__ = ("handle", "target", "job", "arrived", "_wakeup")

    def __init__(self, handle: str, target: str | None, job: str | None) -> None:
        self.handle, self.target, self.job = handle, target, job
        self.arrived: list[m.MailSent | m.JobSettled] = []
        self._wakeup = trio.Event()

    def offer(self, ev: m.MailSent | m.JobSettled) -> None:
        self.arrived.append(ev)
        self._wakeup.set()

    async def next(self) -> m.MailSent | m.JobSettled:
        while not self.arrived:
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        return self.arrived.pop(0)


MAX_WAITS = 256  # waits open at once in all: past it, too-many-waits


class Waits:
    def __init__(
        self,
        per_caller: int,
        total: int,
        enqueue: Callable[[Op[object]], None],
        floods: Floods | None = None,
    ) -> None:
        self.per_caller, self.total = per_caller, total
        self.enqueue = enqueue  # the committer's
        self.floods = Floods() if floods is None else floods  # the daemon's one
        self.by_handle: dict[str, list[Waiter]] = {}
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def cycle(self, handle: str, target: str | None) -> list[str] | None:
        """The cycle a wait from `handle` on `target` would close (handles in order,
        from `handle` back to it), or None."""
        if target is None:
            return None
        parent = {target: handle}
        todo = [target]
        while todo:
            at = todo.pop()
            if at == handle:
                chain, node = [handle], parent[handle]
                while node != handle:
                    chain.append(node)
                    node = parent[node]
                chain.append(handle)
                return chain[::-1]
            for w in self.by_handle.get(at, ()):
                t = w.target
                if t is not None and t not in parent:
                    parent[t] = at
                    todo.append(t)
        return None

    def open(self, handle: str, target: str | None, job: str | None = None) -> Waiter:
        """A new wait, or `too-many-waits` / `would-deadlock` (each also an event)."""
        mine = self.by_handle.get(handle, [])
        if len(mine) >= self.per_caller or self.count >= self.total:
            limit = self.per_caller if len(mine) >= self.per_caller else self.total
            self._refused(handle, "too-many-waits", [], limit)
            who = "this caller" if len(mine) >= self.per_caller else "the daemon"
            raise WireError(
                "too-many-waits", f"{who} already has {limit} waits open (the limit); end one first"
            )
        loop = self.cycle(handle, target)
        if loop is not None:
            self._refused(handle, "would-deadlock", loop, 0)
            raise WireError(
                "would-deadlock",
                f"{handle} waiting on {target} would close a cycle of waits: " + " -> ".join(loop),
            )
        w = Waiter(handle, target, job)
        self.by_handle.setdefault(handle, []).append(w)
        self.count += 1
        # Logged once per flood of the same wait (a loop of short waits), like a refusal.
        count = self.floods.count(("wait/opened", handle, target, job), _now())
        if count:
            self._log(m.WaitOpened(handle=handle, on=target, job=job, count=count))
        return w

    def close(self, w: Waiter) -> None:
        mine = self.by_handle.get(w.handle)
        if mine and w in mine:
            mine.remove(w)
            self.count -= 1
            if not mine:
                del self.by_handle[w.handle]

    def _refused(self, handle: str, code: str, loop: list[str], limit: int) -> None:
        count = self.floods.count((code, handle), _now())
        if count:
            self._log(m.WaitRefused(handle=handle, code=code, cycle=loop, limit=limit, count=count))

    def _log(self, ev: m.Event) -> None:
        try:  # no client waits on its commit
            self.enqueue(EventOp(ev))
        except WireError:
            pass  # stopping: the refusal itself is the answer

    def on_event(self, ev: m.Event) -> None:
        if not self.count:
            return
        if isinstance(ev, m.MailSent):
            for w in self.by_handle.get(ev.to, ()):
                if w.job is None:
                    w.offer(ev)
        elif isinstance(ev, m.JobSettled):
            for waiters in self.by_handle.values():
                for w in waiters:
                    if w.job == ev.session:
                        w.offer(ev)
