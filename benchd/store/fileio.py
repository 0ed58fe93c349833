"""Small durable-file helpers, each written once.

- `write_all`: os.write may write fewer bytes than asked (a signal, a full pipe, a file
  size limit), so every durable writer loops until all is written; this is that loop.
- `fsync_dir`: a rename or a new file is durable only once its directory is fsynced.
"""

import os


def write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """Write all of `data` to a blocking fd (at its position, or with pwrite at
    `offset`), or raise the OSError that stopped it."""
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
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
