"""Spare files: empty regular files in BENCH_DIR/spare/, made ahead of need.

Every message is a file of its own, so every send needs a new inode. On ext4 that
allocation is usually 20-50 us but was measured here at 1-2 ms of kernel CPU for minutes
at a time (after mass deletes, in directories nested a few levels down), and a send made
it on the event loop, where every other client waited for it. A spare is made by a
worker thread while the loop is free; a send opens one (7 us), writes the message into
it and renames it into the inbox at its commit, exactly as it did with its own tmp file.

Spares hold nothing: a spare left non-empty by a crash held a message whose bytes are in
the journal (committed, replayed to its real name) or that was never acknowledged. Each
is emptied when adopted at the next start. They are never mail: nothing reads them.
"""

import os
import stat
import time

SPARE_DIR = "spare"


def adopt(directory: str) -> list[str]:
    """The spares a previous run left, emptied; anything else in the directory (a link,
    a directory, a file with other links or of another user) is left alone."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    uid = os.getuid()
    found = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_nlink != 1:
            continue
        if st.st_size:
            fd = os.open(entry.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)
        found.append(entry.path)
    return found


def make(directory: str, count: int) -> list[str]:
    """`count` new empty files (0600) in `directory` (made if missing, 0700); their paths.
    Not made durable: a spare lost in a crash is only not there to be used."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    stem = f"{time.time_ns():x}"
    made = []
    for i in range(count):
        path = os.path.join(directory, f"{stem}-{i}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        os.close(fd)
        made.append(path)
    return made
