"""The clean-stop seal, and the check of the files that every sealed start still makes.

A clean stop commits the index, folds its WAL into the file, and writes `index.seal`
beside it: the file's size and crc32. The next start takes the seal (removes it first,
so it is trusted at most once) and skips SQLite's b-tree check only if the file is byte
for byte the one that was sealed and the event log ends where the index says.

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
"""

import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Mapping

from benchd.store.fileio import fsync_dir, replace_file
from benchd.store.index import READ, UNREAD, Index

SEAL = "index.seal"
_SUBS = (("inbox", UNREAD), ("read", READ))


def file_sum(path: str) -> str:
    """size:crc32 of a file: the clean-stop seal checks that not a byte changed since."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return f"{size}:{crc:08x}"


def names_digest(ids: list[str]) -> str:
    """A digest of a set of message ids (order-free: sorted first)."""
    ids.sort()
    data = "\n".join(ids).encode("utf-8", "surrogateescape")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def dir_digests(mail_root: str, handle: str) -> list[str]:
    """[inbox digest, read digest] of a mailbox as its directories hold it now."""
    out = []
    for sub, _state in _SUBS:
        ids: list[str] = []
        try:
            with os.scandir(os.path.join(mail_root, handle, sub)) as it:
                for entry in it:
                    # d_type from readdir: no stat. Only regular *.md files are messages.
                    if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                        ids.append(entry.name[:-3])
        except OSError:
            pass  # missing (or not a directory): no names
        out.append(names_digest(ids))
    return out


class Edited(Exception):
    """The index disagrees with itself: edited after its clean stop (set aside, rebuilt)."""


def index_digests(index: Index) -> dict[str, list[str]]:
    """{handle: [inbox digest, read digest]} of the rows the index holds (its database:
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
        handle: [names_digest(by_state.get(state, [])) for _sub, state in _SUBS]
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


def changed_boxes(mail_root: str, held: dict[str, list[str]]) -> set[str]:
    """Mailboxes to reconcile: their names differ from what the index holds (`held`, from
    index_digests), or they are new on disk, or the index knows them and they are gone."""
    try:
        on_disk = set(os.listdir(mail_root))
    except OSError:
        on_disk = set()
    empty = [names_digest([])] * len(_SUBS)  # a mailbox the index holds no mail of
    changed = set()
    for handle in on_disk | set(held):
        if held.get(handle, empty) != dir_digests(mail_root, handle):
            changed.add(handle)
    return changed
