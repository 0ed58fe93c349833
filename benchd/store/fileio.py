"""Writing a whole buffer to a file descriptor.

os.write may write fewer bytes than asked (a signal, a full pipe, a file size limit),
so every durable writer loops until all is written; this is that loop, once.
"""

import os


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to a blocking fd, or raise the OSError that stopped it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
