"""Spare files: empty files a worker thread makes ahead of need in BENCH_DIR/spare/, so
that staging a message on the event loop opens a file instead of creating one: an inode
costs 30 us on a quiet ext4, but 300-600 us of kernel time after many files were deleted
nearby, a third of the daemon's CPU per send. Neither journaled nor flushed (an empty
file nobody was answered about); each start removes what the last run left. Another
process of the same user may swap a spare for something else, so `take` checks what it
opened (`_open_spare`); a send without a spare makes its own.
"""

import os
import stat

import trio

from benchd.store.statedir import is_real_dir

SPARES = 128  # the most kept ready (--spare-files); refilled once fewer than half are left
RETRY_S = 1.0  # after the disk refused one: the sends make their own meanwhile


class Spares:
    def __init__(self, path: str, size: int = SPARES) -> None:
        self.path = path  # BENCH_DIR/spare
        self.size = size
        self.ready: list[str] = []  # paths made by the worker, not yet taken
        self._wanted = trio.Event()
        self._wanted.set()  # fill at once
        self._next = 0  # the next spare's name

    def take(self) -> tuple[int, str] | None:
        """A spare opened for writing, and its path; None when none is ready (the caller
        makes its own file). On the loop."""
        while self.ready:
            path = self.ready.pop()
            if len(self.ready) < self.size // 2:
                self._wanted.set()
            fd = _open_spare(path)
            if fd is not None:
                return fd, path
        self._wanted.set()
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep up to `size` spares ready (none when the spare dir is not a real
        directory: the sends make their own files)."""
        task_status.started()
        if not await trio.to_thread.run_sync(self._clear):
            return
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()  # a take from here on asks again
            want = self.size - len(self.ready)
            if want <= 0:
                continue
            start, self._next = self._next, self._next + want
            made, refused = await trio.to_thread.run_sync(self._make, start, want)
            self.ready.extend(made)
            if refused:
                await trio.sleep(RETRY_S)

    def _clear(self) -> bool:
        """In a worker thread: make the spare dir, or empty what an earlier run left."""
        try:
            os.mkdir(self.path, 0o700)
            return True
        except FileExistsError:
            pass
        except OSError:
            return False
        if not is_real_dir(self.path):
            return False  # a link, or a file: not ours to use
        try:
            with os.scandir(self.path) as it:
                for entry in it:
                    if entry.is_file(follow_symlinks=False):
                        os.unlink(entry.path)
        except OSError:
            return False
        return True

    def _make(self, start: int, n: int) -> tuple[list[str], bool]:
        """In a worker thread: up to `n` new empty files; also whether the disk refused one
        (full, or out of inodes: the next try waits)."""
        made: list[str] = []
        for i in range(start, start + n):
            path = os.path.join(self.path, str(i))
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue  # someone put a file of this name there: not ours
            except OSError:
                return made, True
            os.close(fd)
            made.append(path)
        return made, False


def _open_spare(path: str) -> int | None:
    """The spare at `path` opened for writing, if it is still the empty private file the
    worker made; else None."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if (
        not stat.S_ISREG(st.st_mode)
        or st.st_mode & 0o077
        or st.st_uid != os.getuid()
        or st.st_size != 0
        or st.st_nlink != 1
    ):
        os.close(fd)
        return None
    return fd
