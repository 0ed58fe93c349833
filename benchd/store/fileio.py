"""Small durable-file helpers, each written once.

- `write_all`: os.write may write fewer bytes than asked (a signal, a full pipe, a file
  size limit), so every durable writer loops until all is written; this is that loop.
- `fsync_dir`: a rename or a new file is durable only once its directory is fsynced.
- `replace_file`: a small file rewritten whole (write a temporary, fsync, rename over),
  so a crash leaves the old file or the new one, never a mix.
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


def replace_file(path: str, data: bytes) -> None:
    """Make `path` hold exactly `data` (through `path.tmp`, fsynced, renamed over it). The
    name is durable once the directory is fsynced (fsync_dir), if the caller needs it."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
