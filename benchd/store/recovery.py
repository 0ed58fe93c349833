"""Recovery at start: the clean-stop seal, the check of the index's rows against its
counts and the mailboxes' names, and the index made to agree with the files
(`clean_staging`, `reconcile`). What it sees and what it cannot: docs/durability.md,
"Every start checks the files, not a seal".
"""

import json
import os
import stat
from collections.abc import Callable, Container, Mapping

from bench_wire.errors import WireError
from bench_wire.messages import MailSent
from benchd.core import frontmatter
from benchd.core.names import check_mail_id
from benchd.store import mailfile, search
from benchd.store.fileio import fsync_dir, replace_file
from benchd.store.index import READ, UNREAD, Index
from benchd.store.statedir import is_real_dir, read_regular

SEAL = "index.seal"
_SUBS = (("inbox", UNREAD), ("read", READ))


def file_sum(path: str) -> str:
    """The file's identity and last change, from one stat (no program can set a ctime
    back); a checksum would read the whole index at every stop and start."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def dir_names(mail_root: str, handle: str) -> list[set[str]]:
    """[inbox names, read names] of a mailbox: the `*.md` entries of one readdir each
    (nothing opened or stat'ed)."""
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
    directory named `x.md` is no message)."""
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
    """{handle: [inbox ids, read ids]} of the rows in the index's database. Raises
    Edited when the rows disagree with its counts or hold a state that is no state."""

    # One grouped pass over the (handle, state, id) index, joined in C: no row becomes a
    # Python object.
    q = "SELECT handle, state, group_concat(id, char(10)) FROM messages GROUP BY handle, state"
    rows: list[tuple[str, int, str]] = index.read(lambda db: db.execute(q).fetchall())
    counts_q = "SELECT handle, state, n FROM counts WHERE n != 0"
    counts = set(index.read(lambda db: db.execute(counts_q).fetchall()))
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
    """Mailboxes whose names differ from the rows the index holds (`held`, from
    index_names): changed, new on disk, or gone."""
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


def ensure_search(index: Index, mail_root: str) -> int:
    """Fill the search tables (benchd.store.search) for every message the index knows
    but they do not (an index from before search existed): one anti-join when they are
    complete; only missing messages' files are read. How many it added."""
    db = index.w
    own = not db.in_transaction
    if own:
        db.execute("BEGIN IMMEDIATE")
    try:
        added = 0
        if index.get_meta("search") != search.VERSION:
            missing = db.execute(
                "SELECT handle, id, state FROM messages m WHERE NOT EXISTS "
                "(SELECT 1 FROM mail_links l WHERE l.id = m.id AND l.handle = m.handle)"
            ).fetchall()
            for handle, mail_id, state in missing:
                sub = "read" if state else "inbox"
                try:
                    path = os.path.join(mail_root, handle, sub, mail_id + ".md")
                    meta, body = frontmatter.read(read_regular(path))
                except (OSError, frontmatter.BadMailFile, UnicodeDecodeError):
                    continue  # reconcile drops what it cannot read; so does search
                search.add(
                    db,
                    handle,
                    mail_id,
                    meta.sender,
                    meta.subject,
                    body,
                    meta.in_reply_to,
                    meta.origin,
                )
                added += 1
            index.set_meta("search", search.VERSION)
        if own:
            db.execute("COMMIT")
        return added
    except BaseException:
        if own and db.in_transaction:
            db.execute("ROLLBACK")
        raise


def clean_staging(root: str, skipped: Callable[[str, str], None] = lambda path, why: None) -> int:
    """Remove staged files left in tmp/ by a crash (never acknowledged). Only regular
    files, following no link: anything else is not ours to delete, and opening a FIFO
    would block the start. `skipped(path, why)` hears about each entry left alone."""
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
    """Make the index agree with the files of all mailboxes, or of `handles` (names
    listed; only unknown files are read; the caller flushes). Returns a mail/sent
    (recovered) for each message the index did not know whose mail/sent is not in
    `logged`: delivered just before a crash, or a file a person dropped in."""
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
            index.add_text(handle, mail_id, meta, body)
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
