"""Making files durable, each helper written once (`write_all`, `fsync_dir`,
`replace_file`, the `Flusher`), and `faults`: test-only fault injection at named I/O
points, armed through the `debug/fault` verb (refused unless `--test-hooks`).
"""

import errno
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING


def write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """Write all of `data` to a blocking fd (at its position, or with pwrite at
    `offset`), or raise the OSError that stopped it: os.write may write fewer bytes than
    asked (a signal, a full pipe, a file size limit)."""
    view = memoryview(data)
    if offset is None:
        while view:
            view = view[os.write(fd, view) :]
        return
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def fsync_dir(path: str) -> None:
    """fsync the directory `path`, so the names made or moved in it survive a crash."""
    _sync_path(path, os.fsync, os.O_RDONLY | os.O_DIRECTORY)


def free_bytes(path: str) -> int:
    """The bytes free to us on `path`'s filesystem (0 when it cannot be asked)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def replace_file(path: str, data: bytes, tmp: str | None = None) -> None:
    """Make `path` hold exactly `data` (through `tmp`, by default `path.tmp`, fsynced and
    renamed over it), so a crash leaves the old file or the new one."""
    tmp = path + ".tmp" if tmp is None else tmp
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)


# The flusher: the journal's checkpoints' and replay's fsyncs, issued together from worker
# threads. Never syncfs(2): it would wait for every other program's dirty pages.
if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


class Flusher:
    WORKERS = 16

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None  # made on first use

    def flush(
        self,
        dirs: Iterable[str] = (),
        fds: Iterable[int] = (),
        moved: Iterable[tuple[str, str]] = (),
    ) -> None:
        """fsync each directory, fdatasync each fd, and for each (path, alt) in `moved`
        fdatasync whichever of the two exists (a message a read moved to read/ meanwhile);
        raises the first OSError once all of them are done."""
        jobs: list[tuple[Callable[..., None], object]] = [(fsync_dir, d) for d in sorted(dirs)]
        jobs += [(os.fdatasync, fd) for fd in fds]
        jobs += [(_fdatasync_either, pair) for pair in moved]
        if len(jobs) <= 1:
            for fn, arg in jobs:
                fn(arg)
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="flush")
        # One job per worker, each a plain loop over its share: a future per file cost
        # more of the daemon's GIL than the syncs themselves (a checkpoint has thousands).
        n = min(self.WORKERS, len(jobs))
        futures = [self._pool.submit(_run_all, jobs[i::n]) for i in range(n)]
        errors = [err for f in futures for err in f.result()]
        if errors:
            raise errors[0]


def _run_all(jobs: list[tuple[Callable[..., None], object]]) -> list[OSError]:
    """Run every job (each is tried even after one fails); the failures, in order."""
    errors: list[OSError] = []
    for fn, arg in jobs:
        try:
            fn(arg)
        except OSError as err:
            errors.append(err)
    return errors


def _sync_path(path: str, sync: Callable[[int], None], flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        sync(fd)
    finally:
        os.close(fd)


def _fdatasync_either(pair: tuple[str, str]) -> None:
    path, alt = pair
    for p in (path, alt):
        if not p:
            continue
        try:
            _sync_path(p, os.fdatasync)
            return
        except OSError as err:
            if err.errno != errno.ENOENT:
                raise
    # Gone from both: removed by hand meanwhile; nothing of ours to make durable.


class Faults:
    """The armed fault points: point -> [errno, how many more times to fail]."""

    def __init__(self) -> None:
        self._armed: dict[str, list[int]] = {}

    def arm(self, point: str, err: str, count: int) -> None:
        code = getattr(errno, err, None)
        if not isinstance(code, int):
            raise ValueError(f"unknown errno name {err!r}")
        if count <= 0:
            self._armed.pop(point, None)
        else:
            self._armed[point] = [code, count]

    def check(self, point: str) -> None:
        slot = self._armed.get(point)
        if slot is None:
            return
        slot[1] -= 1
        if slot[1] <= 0:
            del self._armed[point]
        raise OSError(slot[0], os.strerror(slot[0]) + f" (injected at {point})")

    def clear(self) -> None:
        self._armed.clear()


faults = Faults()  # the daemon's one set (a process runs one daemon)
