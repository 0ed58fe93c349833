"""disk.reserve in the state dir: a little room held on the state dir's disk for the
next start.

Mail fills a disk to the last byte; a start then still needs some (SQLite's -wal and
-shm files, the first events). The daemon holds this file while it runs and removes it
first thing at start, so a start after the disk filled has that room; once started it
writes the file again with whatever room there is (best effort, never more than asked).
"""

import errno
import os

from benchd.store.fileio import write_all

ROOM = "disk.reserve"
# Free bytes the journal never takes to preallocate its segments (below it they grow
# with their records): --disk-reserve until nothing set it.
DISK_RESERVE = 64 << 20
ROOM_BYTES = 256 << 10  # never more than DISK_RESERVE


def release(root: str) -> int:
    """Remove the file; the bytes it gave back."""
    path = os.path.join(root, ROOM)
    try:
        size = os.lstat(path).st_size
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return size


def keep(root: str, size: int) -> int:
    """Hold up to `size` bytes again (fewer on a disk without them); the bytes held."""
    if size <= 0:
        return 0
    fd = os.open(os.path.join(root, ROOM), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    held = 0
    try:
        chunk = bytes(min(size, 64 << 10))
        while held < size:
            try:
                write_all(fd, chunk[: size - held], held)
            except OSError as err:
                if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                os.ftruncate(fd, held)  # a partial chunk: keep what was whole
                break
            held += min(len(chunk), size - held)
        os.fsync(fd)
    finally:
        os.close(fd)
    return held
