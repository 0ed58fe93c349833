"""The clean-stop seal: how a start knows it may trust the index without reading mail.

A clean stop commits the index, folds its WAL into the file, and writes `index.seal`
beside it: the file's size and crc32, and the mtime of every mailbox's inbox/ and read/.
The next start takes the seal (removes it first, so it is trusted at most once) and
trusts the index only if the file is byte for byte the one that was sealed and the event
log ends where the index says. Mailboxes whose directories changed since (a file a
person dropped in, moved or removed) are listed again; the others are not touched.

Why this is enough: every change the daemon makes to the index passes through a
commit, so a file equal to the sealed one holds exactly what was committed at the clean
stop; damage to any byte (a bad sector, a stray write) changes the crc. A crc32 of the
file is a sequential read of a few MB (about 25 MB for 100,000 messages), far cheaper
than opening every message, and cheaper than SQLite's own page-by-page quick_check.
What the seal cannot see: a directory changed within the same clock tick as the
daemon's last change before the stop (its mtime would not move), and a message file
edited in place (reads meet that: bad-mail-file).
"""

import json
import os

from benchd.store.fileio import write_all
from benchd.store.index import Index, file_sum

SEAL = "index.seal"


def box_stamps(mail_root: str) -> dict[str, list[int]]:
    """{handle: [inbox mtime_ns, read mtime_ns]} of every mailbox (0: missing)."""
    stamps: dict[str, list[int]] = {}
    try:
        handles = os.listdir(mail_root)
    except OSError:
        return stamps
    for handle in handles:
        stamps[handle] = [_mtime(os.path.join(mail_root, handle, sub)) for sub in ("inbox", "read")]
    return stamps


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def seal(index: Index, seal_path: str, mail_root: str) -> bool:
    """Close the index cleanly and write the seal. False (no seal) if anything failed."""
    if not index.close_clean():
        return False
    try:
        data = json.dumps({"sum": file_sum(index.path), "dirs": box_stamps(mail_root)})
        tmp = seal_path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, data.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, seal_path)
        return True
    except OSError:
        return False


def take_seal(seal_path: str) -> dict | None:
    """Read and remove the seal (durably: a crash later must not find it again)."""
    try:
        with open(seal_path, "rb") as f:
            raw = f.read()
        os.unlink(seal_path)
        dfd = os.open(os.path.dirname(seal_path) or ".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    ok = (
        isinstance(obj, dict)
        and isinstance(obj.get("sum"), str)
        and isinstance(obj.get("dirs"), dict)
    )
    return obj if ok else None


def seal_matches(seal_obj: dict | None, db_path: str) -> bool:
    if seal_obj is None:
        return False
    try:
        return file_sum(db_path) == seal_obj["sum"]
    except OSError:
        return False


def changed_boxes(mail_root: str, sealed: dict, indexed: list[str]) -> set[str]:
    """Mailboxes to list again: their directories' mtimes differ from the sealed ones,
    or they are new, or the index knows them and they are gone."""
    now = box_stamps(mail_root)
    changed = {h for h, st in now.items() if sealed.get(h) != st}
    changed |= {h for h in set(sealed) | set(indexed) if h not in now}
    return changed
