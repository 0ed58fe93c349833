"""Recovery at start: the clean-stop seal, the check of the files that every sealed start
still makes, and the mailroom made to agree with its files.

A clean stop commits the index, folds its WAL into the file, and writes `index.seal`
beside it: the file's identity and change time (`file_sum`). The next start takes the
seal (removes it first, so it is trusted at most once) and skips SQLite's b-tree check
only if the file is the one that was sealed, unwritten since, and the event log ends
where the index says.

The seal says only that the file is the one the daemon closed; it is no proof against
an edit, since whoever can rewrite the index can rewrite the seal beside it. So nothing
the start trusts is a record the index keeps of itself: every sealed start reads the
index's own rows (the ids of each mailbox in each state, one grouped query) and

- checks them against the index's per-mailbox counts (a listing's `total`): rows and
  counts that disagree mean the file was edited, and it is set aside and rebuilt;
- lists each mailbox's inbox/ and read/ (names only, from readdir; no file is opened or
  stat'ed) and compares the names with the rows. A mailbox whose names differ is
  reconciled (only its unknown files are read).

So a row deleted or added by hand, a file dropped in, deleted, or moved between inbox/
and read/ is seen whether it happened while the daemon ran or while it was stopped, and
a seal forged for a stale or edited index vouches only for what the files confirm. Both
costs are one pass over names (no file read), the order of a directory listing.

What this cannot see (docs/durability.md says it for users): an edit inside a message
file (its name does not change; a read shows the file as it is, or answers
bad-mail-file), an edit of a row's other fields that keeps its id and state (its key,
subject or sender: the files are not read to check them), and files the index can never
hold (not a message, or an invalid name), which make their mailbox be listed again at
every start.

The mailroom at start (`clean_staging`, `reconcile`): staging a crash left is cleared,
and the index is made to agree with the files (the files are the record; the index is
their cache). Both run before the daemon serves anyone: benchd.server.startup calls them.
"""

import json
import os
import sqlite3
import stat
from collections.abc import Callable, Container, Mapping

from bench_wire.errors import WireError
from bench_wire.messages import MailSent
from benchd.core.names import check_mail_id
from benchd.store import mailfile
from benchd.store.fileio import fsync_dir, replace_file
from benchd.store.index import READ, UNREAD, Index
from benchd.store.statedir import is_real_dir, read_regular

SEAL = "index.seal"
_SUBS = (("inbox", UNREAD), ("read", READ))


def file_sum(path: str) -> str:
    """The file's identity and last change, from one stat: device, inode, size, and the
    modification and change times in ns. Any write to the file moves its change time,
    which no program can set back (utime sets the others), and a file put back in its
    place is another inode: the seal matches only the file the stop closed, untouched.
    (A checksum of the bytes read the whole index at every stop and start, ~0.1 s per
    100,000 messages, to catch what this cannot: bits that rot on disk while the daemon
    is stopped. SQLite reports those it meets as corruption, which sets the file aside.)"""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def dir_names(mail_root: str, handle: str) -> list[set[str]]:
    """[inbox names, read names] of a mailbox as its directories hold them now: the
    `*.md` entries of one readdir each (os.listdir, in C; nothing opened or stat'ed)."""
    out = []
    for sub, _state in _SUBS:
        try:
            names = os.listdir(os.path.join(mail_root, handle, sub))
        except OSError:
            names = []  # missing (or not a directory): no names
        out.append({n[:-3] for n in names if n.endswith(".md")})
    return out


def _only_on_disk_are_no_messages(directory: str, extra: set[str]) -> bool:
    """Names on disk the index lacks are fine only if none is a regular file (a
    directory named `x.md` is no message). Stat'ed only when names differ, and only
    until the first message file."""
    for name in extra:
        try:
            if stat.S_ISREG(os.lstat(os.path.join(directory, name + ".md")).st_mode):
                return False
        except OSError:
            continue  # gone meanwhile
    return True


class Edited(Exception):
    """The index disagrees with itself: edited after its clean stop (set aside, rebuilt)."""


def index_names(index: Index) -> dict[str, list[frozenset[str]]]:
    """{handle: [inbox ids, read ids]} of the rows the index holds (its database:
    a start reads it before anything is pending). Raises Edited when the rows disagree
    with the index's counts or hold a state that is no state."""

    def scan(
        db: sqlite3.Connection,
    ) -> tuple[list[tuple[str, int, str]], set[tuple[str, int, int]]]:
        # One grouped pass over the (handle, state, id) index, joined in C: no row
        # becomes a Python object.
        rows = db.execute(
            "SELECT handle, state, group_concat(id, char(10)) FROM messages GROUP BY handle, state"
        ).fetchall()
        counts = db.execute("SELECT handle, state, n FROM counts WHERE n != 0").fetchall()
        return rows, set(counts)

    rows, counts = index.read(scan)
    held: dict[str, dict[int, list[str]]] = {}
    counted = set()
    for handle, state, joined in rows:
        if state not in (UNREAD, READ):
            raise Edited(f"a row of {handle!r} has state {state!r}")
        ids = joined.split("\n")
        held.setdefault(handle, {})[state] = ids
        counted.add((handle, state, len(ids)))
    if counted != counts:
        raise Edited(f"its counts disagree with its rows: {sorted(counts ^ counted)[:4]}")
    return {
        handle: [frozenset(by_state.get(state, ())) for _sub, state in _SUBS]
        for handle, by_state in held.items()
    }


def seal(index: Index, seal_path: str) -> bool:
    """Close the index cleanly and write the seal. False (no seal) if anything failed."""
    if not index.flush() or not index.close_clean():
        index.close()
        return False
    try:
        replace_file(seal_path, json.dumps({"sum": file_sum(index.path)}).encode())
        return True
    except OSError:
        return False


def take_seal(seal_path: str) -> dict[str, object] | None:
    """Read and remove the seal (durably: a crash later must not find it again)."""
    try:
        with open(seal_path, "rb") as f:
            raw = f.read()
        os.unlink(seal_path)
        fsync_dir(os.path.dirname(seal_path) or ".")
    except OSError:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("sum"), str) else None


def seal_matches(seal_obj: Mapping[str, object] | None, db_path: str) -> bool:
    if seal_obj is None:
        return False
    try:
        return file_sum(db_path) == seal_obj["sum"]
    except OSError:
        return False


def changed_boxes(mail_root: str, held: dict[str, list[frozenset[str]]]) -> set[str]:
    """Mailboxes to reconcile: their names differ from what the index holds (`held`, from
    index_names), or they are new on disk, or the index knows them and they are gone."""
    try:
        on_disk = set(os.listdir(mail_root))
    except OSError:
        on_disk = set()
    empty: list[frozenset[str]] = [frozenset()] * len(_SUBS)  # a mailbox with no rows
    changed = set()
    for handle in on_disk | set(held):
        rows = held.get(handle, empty)
        for (sub, _state), names, ids in zip(
            _SUBS, dir_names(mail_root, handle), rows, strict=True
        ):
            if names == ids:
                continue
            extra = names - ids
            if len(extra) != len(names) - len(ids) or not _only_on_disk_are_no_messages(
                os.path.join(mail_root, handle, sub), extra
            ):
                changed.add(handle)  # a row without its file, or a file without its row
                break
    return changed


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
