"""Opening bench's SQLite file (the mail index): the settings in one place.

- isolation_level=None: each caller says BEGIN itself, so a transaction is exactly
  what it writes and never opened behind its back;
- check_same_thread=False: sqlite3's own check is off; the daemon uses each connection
  from its event loop's thread only (the committer has no worker thread);
- WAL with synchronous=NORMAL: a commit is an append to the WAL with no fsync; what must
  survive a power cut is made durable otherwise (the index is rebuilt from the mail
  files);
- the busy timeout: how long a lock another program holds is waited for.
"""

import sqlite3

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
