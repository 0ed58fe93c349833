"""The mail index: SQLite, so send, list and read cost O(page) / O(log n), not O(mailbox).

The files in mail/ are the record; this index is a cache the files can rebuild. It holds
per message the metadata a listing shows, its state and its idempotency key, plus a
count per (handle, state) so a listing's `total` is O(1).

Durability: WAL with synchronous=NORMAL. A kill -9 of the daemon loses nothing
committed (it is in the OS); a power cut may lose the last commits, which is why the
daemon marks the index clean only at a clean stop and reconciles it against the mail
directories (names only, files read only when missing) after any other stop.

One connection, `w`, used only on the event loop: the committer applies each batch to
it in a transaction that spans batches (see committer.py), and reads go through the
same connection so they see every answered op, committed or not yet.
"""

import os
import sqlite3

SCHEMA_VERSION = "1"
UNREAD, READ = 0, 1
STATE_NAMES = {UNREAD: "unread", READ: "read"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages(
  handle TEXT NOT NULL, id TEXT NOT NULL, state INTEGER NOT NULL,
  sender TEXT NOT NULL, subject TEXT NOT NULL, date TEXT NOT NULL,
  size INTEGER NOT NULL, key TEXT NOT NULL,
  PRIMARY KEY (handle, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS by_state ON messages(handle, state, id);
CREATE INDEX IF NOT EXISTS by_key ON messages(sender, key);
CREATE TABLE IF NOT EXISTS counts(
  handle TEXT NOT NULL, state INTEGER NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (handle, state)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


class Index:
    def __init__(self, path: str):
        self.path = path
        self.fresh = not os.path.exists(path)
        try:
            self.w = connect(path)
            self.w.executescript(_SCHEMA)
            ok = self.get_meta("schema") in (None, SCHEMA_VERSION)
        except sqlite3.DatabaseError:
            ok = False
        if not ok:
            self._recreate()
        if self.get_meta("schema") is None:
            self.set_meta("schema", SCHEMA_VERSION)

    def _recreate(self) -> None:
        # A damaged or foreign index is set aside (never trusted) and rebuilt from files.
        if getattr(self, "w", None) is not None:
            self.w.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, self.path + suffix + ".damaged")
        self.fresh = True
        self.w = connect(self.path)
        self.w.executescript(_SCHEMA)

    def close(self) -> None:
        if self.w.in_transaction:
            self.w.execute("COMMIT")
        self.w.close()

    # ---------------------------------------------------------------- meta

    def get_meta(self, k: str) -> str | None:
        row = self.w.execute("SELECT v FROM meta WHERE k=?", (k,)).fetchone()
        return row[0] if row else None

    def set_meta(self, k: str, v: str) -> None:
        self.w.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (k, v))

    # ---------------------------------------------------------------- writer side

    def begin(self) -> None:
        self.w.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.w.execute("COMMIT")

    def rollback(self) -> None:
        if self.w.in_transaction:
            self.w.execute("ROLLBACK")

    def find_key(self, sender: str, key: str):
        return self.w.execute(
            "SELECT handle, id, state FROM messages WHERE sender=? AND key=? LIMIT 1",
            (sender, key),
        ).fetchone()

    def add(self, handle, mail_id, state, sender, subject, date, size, key) -> None:
        self.w.execute(
            "INSERT OR IGNORE INTO messages VALUES (?,?,?,?,?,?,?,?)",
            (handle, mail_id, state, sender, subject, date, size, key),
        )
        if self.w.execute("SELECT changes()").fetchone()[0]:
            self._bump(handle, state, 1)

    def set_state(self, handle: str, mail_id: str, state: int) -> bool:
        row = self.w.execute(
            "SELECT state FROM messages WHERE handle=? AND id=?", (handle, mail_id)
        ).fetchone()
        if row is None or row[0] == state:
            return False
        self.w.execute(
            "UPDATE messages SET state=? WHERE handle=? AND id=?", (state, handle, mail_id)
        )
        self._bump(handle, row[0], -1)
        self._bump(handle, state, 1)
        return True

    def remove(self, handle: str, mail_id: str) -> None:
        row = self.w.execute(
            "SELECT state FROM messages WHERE handle=? AND id=?", (handle, mail_id)
        ).fetchone()
        if row is not None:
            self.w.execute("DELETE FROM messages WHERE handle=? AND id=?", (handle, mail_id))
            self._bump(handle, row[0], -1)

    def _bump(self, handle: str, state: int, d: int) -> None:
        self.w.execute(
            "INSERT INTO counts(handle, state, n) VALUES (?,?,?) "
            "ON CONFLICT(handle, state) DO UPDATE SET n = n + excluded.n",
            (handle, state, d),
        )

    def ids_w(self, handle: str) -> dict[str, int]:
        return dict(
            self.w.execute("SELECT id, state FROM messages WHERE handle=?", (handle,))
        )

    def handles_w(self) -> list[str]:
        return [r[0] for r in self.w.execute("SELECT DISTINCT handle FROM counts")]

    def newest_id_w(self) -> str | None:
        row = self.w.execute("SELECT max(id) FROM messages").fetchone()
        return row[0] if row else None

    # ---------------------------------------------------------------- reader side

    def count(self, handle: str, state: int | None) -> int:
        if state is None:
            row = self.w.execute("SELECT sum(n) FROM counts WHERE handle=?", (handle,)).fetchone()
        else:
            row = self.w.execute(
                "SELECT n FROM counts WHERE handle=? AND state=?", (handle, state)
            ).fetchone()
        return int(row[0] or 0) if row else 0

    def page(self, handle: str, state: int | None, after: str | None, limit: int):
        """Up to `limit` rows in send order after the cursor id, plus one to say 'more'."""
        after = after or ""
        if state is None:
            q = (
                "SELECT id, sender, subject, date, state, size FROM messages "
                "WHERE handle=? AND id>? ORDER BY id LIMIT ?"
            )
            args: tuple = (handle, after, limit + 1)
        else:
            q = (
                "SELECT id, sender, subject, date, state, size FROM messages "
                "WHERE handle=? AND state=? AND id>? ORDER BY id LIMIT ?"
            )
            args = (handle, state, after, limit + 1)
        return self.w.execute(q, args).fetchall()

    def get(self, handle: str, mail_id: str):
        return self.w.execute(
            "SELECT id, sender, subject, date, state, size, key FROM messages "
            "WHERE handle=? AND id=?",
            (handle, mail_id),
        ).fetchone()

    def oldest_unread(self, handle: str) -> str | None:
        row = self.w.execute(
            "SELECT id FROM messages WHERE handle=? AND state=0 ORDER BY id LIMIT 1", (handle,)
        ).fetchone()
        return row[0] if row else None

    def mailbox_count(self) -> int:
        return self.w.execute("SELECT count(DISTINCT handle) FROM counts").fetchone()[0]
