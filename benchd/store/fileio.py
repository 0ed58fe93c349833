"""Writing a whole buffer to a file descriptor.

os.write may write fewer bytes than asked (a signal, a full pipe, a file size limit),
so every durable writer loops until all is written; this is that loop, once.
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
