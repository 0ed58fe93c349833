"""The mailroom at start: staging a crash left is cleared, and the index is made to
agree with the files (the files are the record; the index is their cache).

Both run before the daemon serves anyone: recovery in benchd.server.startup calls them.
"""

import os
from collections.abc import Callable, Container

from bench_wire.errors import WireError
from bench_wire.messages import MailSent
from benchd.core.names import check_mail_id
from benchd.store import mailfile
from benchd.store.fileio import fsync_dir
from benchd.store.index import READ, UNREAD, Index
from benchd.store.statedir import is_real_dir, read_regular


def clean_staging(root: str, skipped: Callable[[str, str], None] = lambda path, why: None) -> int:
    """Remove staged files left in tmp/ by a crash: never acknowledged, never visible.

    Only regular files are removed, and no link is followed (a linked mailbox or tmp/
    is skipped whole): anything else there is not ours to delete, and opening a FIFO
    would block the start. `skipped(path, why)` hears about each entry left alone.
    """
    removed = 0
    if not is_real_dir(root):
        return 0
    for handle in os.listdir(root):
        tmp = os.path.join(root, handle, "tmp")
        if not is_real_dir(os.path.join(root, handle)) or not is_real_dir(tmp):
            if os.path.lexists(tmp):
                skipped(tmp, "not a directory (a link?): not cleaned")
            continue
        n = 0
        with os.scandir(tmp) as it:
            for entry in it:
                if not entry.is_file(follow_symlinks=False):
                    skipped(entry.path, "not a regular file: left alone")
                    continue
                os.unlink(entry.path)
                n += 1
        if n:
            fsync_dir(tmp)
        removed += n
    return removed


def reconcile(
    root: str,
    index: Index,
    logged: Container[str] = frozenset(),
    handles: set[str] | None = None,
) -> list[MailSent]:
    """Make the index agree with the files (names listed; only unknown files are read).

    All mailboxes, or only `handles`. The changes go to the index's pending layer (the
    caller flushes). Returns a mail/sent event (recovered=True) for each message found on
    disk that the index did not know and whose mail/sent is not in `logged`: delivered
    just before a crash before its event was logged, or a file a person dropped in.
    """
    recovered: list[MailSent] = []
    if handles is None:
        handles = set(index.handles())
        if os.path.isdir(root):
            handles |= {h for h in os.listdir(root) if is_real_dir(os.path.join(root, h))}
    for handle in sorted(handles):
        known = index.ids(handle)
        on_disk: dict[str, int] = {}
        for sub, state in (("inbox", UNREAD), ("read", READ)):
            d = os.path.join(root, handle, sub)
            if is_real_dir(d):
                with os.scandir(d) as it:
                    for entry in it:
                        # Only regular files are messages (a FIFO would block the read).
                        if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                            on_disk[entry.name[:-3]] = state
        for mail_id, state in on_disk.items():
            if known.get(mail_id) == state:
                continue
            if mail_id in known:
                index.set_state(handle, mail_id, state)
                continue
            path = os.path.join(root, handle, "read" if state else "inbox", mail_id + ".md")
            try:
                check_mail_id(mail_id)
                meta, body = mailfile.read(path, read_regular(path))
            except (OSError, WireError):
                continue  # not ours (or not a mail file): left alone, never indexed
            index.add(
                handle, mail_id, state, meta.sender, meta.subject, meta.date, len(body), meta.key
            )
            index.add_text(handle, mail_id, meta.sender, meta.subject, body, meta)
            if mail_id in logged:
                continue
            recovered.append(
                MailSent(
                    mail_id=mail_id,
                    sender=meta.sender,
                    to=handle,
                    path=path,
                    key=meta.key,
                    recovered=True,
                )
            )
        for mail_id in known.keys() - on_disk.keys():
            index.remove(handle, mail_id)
    return recovered
