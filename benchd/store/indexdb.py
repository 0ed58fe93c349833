"""The mail index's changes: `Pending`, the in-memory layer (the changes since the last
commit and what they mean for reads), and what a flush does to SQLite: the schema, and
the one transaction (`write`) that applies them (benchd.store.index decides when).
"""

import sqlite3
from typing import assert_never

import msgspec

from benchd.store import mailstates
from benchd.store.mailstates import Columns

UNREAD, READ = 0, 1


class MailRow(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One message as the index holds it: what a listing shows, its state and its key.

    A Struct rather than a NamedTuple: msgspec.convert builds a page of them from the
    cursor's tuples in C (measured: a NamedTuple per row cost the 51-row page query
    about twice as much on top of the bare fetch)."""

    mail_id: str
    sender: str
    subject: str
    date: str
    state: int  # UNREAD or READ
    size: int
    key: str


class KeyHit(msgspec.Struct, frozen=True, gc=False):
    """Where an idempotency key's message is."""

    handle: str
    mail_id: str
    state: int


# The index's changes, one frozen value per kind, applied by `write` at the next flush.


class Insert(msgspec.Struct, frozen=True, gc=False):
    """A message indexed (INSERT OR IGNORE: one already there is left as it is)."""

    handle: str
    row: MailRow


class AddText(msgspec.Struct, frozen=True, gc=False):
    """What search and threads need of a message (benchd/store/search.py)."""

    handle: str
    mail_id: str
    sender: str
    subject: str
    body: bytes | str
    in_reply_to: str | None
    origin: str | None


class SetState(msgspec.Struct, frozen=True, gc=False):
    """A message moved between unread and read."""

    handle: str
    mail_id: str
    state: int


class SetColumns(msgspec.Struct, frozen=True, gc=False):
    """Delivery-state columns of a sent message set (benchd/store/mailstates.py)."""

    mail_id: str
    cols: Columns


class Remove(msgspec.Struct, frozen=True, gc=False):
    """A message dropped from the index (its file is gone)."""

    handle: str
    mail_id: str


Change = Insert | AddText | SetState | SetColumns | Remove


class Pending:
    """The changes since the last commit, and what they mean for reads (pure, in memory).

    `rows` maps (handle, id) to the row as the database would now hold it, or None when
    it was removed; `base` to the state the database holds for it (None: absent), so
    counts can be adjusted.
    """

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.rows: dict[tuple[str, str], MailRow | None] = {}
        self.base: dict[tuple[str, str], int | None] = {}
        self.keys: dict[tuple[str, str], tuple[str, str]] = {}
        self.by_handle: dict[str, set[str]] = {}
        self.meta: dict[str, str] = {}
        # mail id -> the delivery-state columns set since the commit (benchd.store.mailstates)
        self.states: dict[str, Columns] = {}
        self.since = 0.0  # the index clock's reading at the oldest change

    def __len__(self) -> int:
        return len(self.changes)

    def date(self, now: float) -> None:
        """Date the first change since the commit with `now` (the index's clock)."""
        if not self.changes and not self.meta:
            self.since = now

    def touch(self, handle: str, mail_id: str, base: int | None, now: float) -> None:
        """Note a change of (handle, mail_id); `base` is its state in the database (None:
        absent), kept from its first change since the commit."""
        self.date(now)
        self.base.setdefault((handle, mail_id), base)
        self.by_handle.setdefault(handle, set()).add(mail_id)

    def count_delta(self, handle: str, state: int | None) -> int:
        d = 0
        for mail_id in self.by_handle.get(handle, ()):
            before = self.base[(handle, mail_id)]
            row = self.rows[(handle, mail_id)]
            now = None if row is None else row.state
            if state is None:
                d += (now is not None) - (before is not None)
            else:
                d += (now == state) - (before == state)
        return d


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
            case Insert(handle, MailRow(state=state) as row):
                if w.execute(
                    "INSERT OR IGNORE INTO messages(handle, id, sender, subject, date, state, "
                    "size, key) VALUES (?,?,?,?,?,?,?,?)",
                    (handle, *msgspec.structs.astuple(row)),
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
    w.executemany(  # even a count of 0: its row names the mailbox
        "INSERT INTO counts(handle, state, n) VALUES (?,?,?) "
        "ON CONFLICT(handle, state) DO UPDATE SET n = n + excluded.n",
        [(handle, state, d) for (handle, state), d in bumps.items()],
    )
    for k, v in p.meta.items():
        w.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (k, v))
    w.execute("COMMIT")


# Opening the index: each caller says BEGIN itself (isolation_level=None); each
# connection is used from the event loop's thread only (check_same_thread=False); WAL
# with synchronous=NORMAL, no fsync (the index is rebuilt from the mail files); a busy
# timeout of 0: a lock another program holds fails a commit at once (retried later), so
# the loop never waits on it.


MEMORY = ":memory:"  # a database in memory (the index's fallback when no file can be made)


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    if path != MEMORY:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=0")
    return db


def is_corrupt(err: sqlite3.Error) -> bool:
    """A damaged or foreign file, as opposed to a passing condition (busy, full, I/O)."""
    if not isinstance(err, sqlite3.DatabaseError):
        return False
    if isinstance(err, sqlite3.OperationalError):
        msg = str(err).lower()
        return "malformed" in msg or "not a database" in msg or "no such table" in msg
    return True  # DatabaseError proper: malformed image, not a database
