"""The mail index's database: its schema, and the one transaction a flush writes.

`benchd.store.index` keeps the pending changes in memory and decides when to flush and
what a failure means; this module is what a flush does to SQLite: each pending change
(a tagged union, benchd.store.pending) taken apart with `match`, and the per-mailbox
counts moved once per (handle, state) per commit.
"""

import sqlite3
from typing import assert_never

import msgspec

from benchd.store import mailstates
from benchd.store.pending import AddText, Insert, Pending, Remove, SetColumns, SetState

SCHEMA_VERSION = "1"

SCHEMA = (
    """
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
    + mailstates.SCHEMA
)


def write(w: sqlite3.Connection, p: Pending) -> None:
    """Apply `p`'s changes and meta in one transaction (BEGIN IMMEDIATE ... COMMIT).
    Raises sqlite3.Error with the transaction open: the caller rolls back and keeps `p`."""
    from benchd.store import search  # FTS rows
    from benchd.store.fileio import faults  # the test hooks

    w.execute("BEGIN IMMEDIATE")
    faults.check("index")
    # The counts change once per (handle, state) per commit, not once per message:
    # a batch of sends to one mailbox is one upsert.
    bumps: dict[tuple[str, int], int] = {}
    for change in p.changes:
        match change:
            case Insert(handle, _, state):
                if w.execute(
                    "INSERT OR IGNORE INTO messages VALUES (?,?,?,?,?,?,?,?)",
                    msgspec.structs.astuple(change),
                ).rowcount:
                    bumps[(handle, state)] = bumps.get((handle, state), 0) + 1
            case SetState(handle, mail_id, state):
                row = w.execute(
                    "SELECT state FROM messages WHERE handle=? AND id=?", (handle, mail_id)
                ).fetchone()
                if row is not None and row[0] != state:
                    w.execute(
                        "UPDATE messages SET state=? WHERE handle=? AND id=?",
                        (state, handle, mail_id),
                    )
                    bumps[(handle, row[0])] = bumps.get((handle, row[0]), 0) - 1
                    bumps[(handle, state)] = bumps.get((handle, state), 0) + 1
            case AddText():
                search.add(w, *msgspec.structs.astuple(change))
            case SetColumns(mail_id, cols):
                mailstates.write(w, mail_id, cols)
            case Remove(handle, mail_id):
                row = w.execute(
                    "SELECT state FROM messages WHERE handle=? AND id=?", (handle, mail_id)
                ).fetchone()
                if row is not None:
                    w.execute("DELETE FROM messages WHERE handle=? AND id=?", (handle, mail_id))
                    bumps[(handle, row[0])] = bumps.get((handle, row[0]), 0) - 1
                search.remove(w, handle, mail_id)
            case _:
                assert_never(change)
    for (handle, state), d in bumps.items():
        _bump(w, handle, state, d)  # even 0: the row names the mailbox, as before
    for k, v in p.meta.items():
        w.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (k, v))
    w.execute("COMMIT")


def _bump(w: sqlite3.Connection, handle: str, state: int, d: int) -> None:
    w.execute(
        "INSERT INTO counts(handle, state, n) VALUES (?,?,?) "
        "ON CONFLICT(handle, state) DO UPDATE SET n = n + excluded.n",
        (handle, state, d),
    )


# Opening bench's SQLite file (the mail index): the settings in one place.
#
# - isolation_level=None: each caller says BEGIN itself, so a transaction is exactly
#   what it writes and never opened behind its back;
# - check_same_thread=False: sqlite3's own check is off; the daemon uses each connection
#   from its event loop's thread only (the committer has no worker thread);
# - WAL with synchronous=NORMAL: a commit is an append to the WAL with no fsync; what must
#   survive a power cut is made durable otherwise (the index is rebuilt from the mail
#   files);
# - the busy timeout: how long a lock another program holds is waited for.


MEMORY = ":memory:"  # a database in memory (the index's fallback when no file can be made)


def connect(path: str, busy_ms: int) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    if path != MEMORY:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    return db


def is_corrupt(err: sqlite3.Error) -> bool:
    """A damaged or foreign file, as opposed to a passing condition (busy, full, I/O)."""
    if not isinstance(err, sqlite3.DatabaseError):
        return False
    if isinstance(err, sqlite3.OperationalError):
        msg = str(err).lower()
        return "malformed" in msg or "not a database" in msg or "no such table" in msg
    return True  # DatabaseError proper: malformed image, not a database
