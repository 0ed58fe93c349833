"""The pool of spare files (benchd.store.spares) a send writes its message into.

Refilled by one worker thread of its own whenever it falls to three quarters of its
size (`--spare-files`), so the inode allocation happens beside the event loop instead of
on it. An empty pool is no refusal: a send then makes its own file in the mailbox's tmp/,
as it always did (counted in `misses`). A refill that fails (no inodes left, a read-only
disk) is logged once and tried again after a pause that doubles up to 30 s.
"""

import collections
import os
from typing import Any

import trio

from benchd.store import spares

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
BATCH = 32  # made per thread call: the first spares are back on the loop soon after a start


class Spares:
    def __init__(self, bench_dir: str, size: int, log: Any):
        self.dir = os.path.join(bench_dir, spares.SPARE_DIR)
        self.size = size
        self.log = log
        self.ready: collections.deque[str] = collections.deque()
        self.misses = 0  # sends that found the pool empty
        self._wanted = trio.Event()
        # Its own thread, so a refill never takes a worker the committer's flushes need.
        self._thread = trio.CapacityLimiter(1)

    def adopt(self) -> int:
        """Take what the previous run left (at start, before any send)."""
        if self.size <= 0:
            return 0
        left = spares.adopt(self.dir)
        self.ready.extend(left[: self.size])
        return len(left)

    def take(self) -> str | None:
        """A spare's path (an empty file of ours), or None when the pool is empty."""
        if len(self.ready) <= self.size * 3 // 4:
            self._wanted.set()
        if self.ready:
            return self.ready.popleft()
        if self.size > 0:
            self.misses += 1
        return None

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.size <= 0:
            return
        self._wanted.set()
        pause = RETRY_FIRST_S
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            while len(self.ready) < self.size:
                count = min(BATCH, self.size - len(self.ready))
                try:
                    made = await trio.to_thread.run_sync(
                        spares.make, self.dir, count, limiter=self._thread
                    )
                except OSError as err:
                    if pause == RETRY_FIRST_S:
                        self.log.warning(
                            "spare files not made",
                            dir=self.dir,
                            error=f"{err.strerror or err}",
                            retry_s=pause,
                        )
                    await trio.sleep(pause)
                    pause = min(pause * 2, RETRY_MAX_S)
                    continue
                pause = RETRY_FIRST_S
                self.ready.extend(made)
