"""The mail index: SQLite, so send, list and read cost O(page) / O(log n), not O(mailbox).

A cache the files in mail/ can rebuild (docs/durability.md, "The index is a cache"), in
two layers, both used on the event loop only: `pending` in memory (every change since
the last commit, each a frozen value of a tagged union; it cannot fail, so an answered
send is found whatever SQLite does; reads merge it over the database), and the database,
written by `flush()` in one transaction (`write`). Every failure and rebuild goes to
`notify`.
"""

import contextlib
import os
import sqlite3
from collections.abc import Callable
from operator import attrgetter
from typing import Literal, TypeVar, assert_never

import msgspec
import trio

from bench_wire import messages as m
from benchd.core.frontmatter import FrontMatter
from benchd.store import mailstates, search
from benchd.store.fileio import faults
from benchd.store.mailstates import Columns

UNREAD, READ = 0, 1
STATE_NAMES: dict[int, Literal["unread", "read"]] = {UNREAD: "unread", READ: "read"}
PERSISTENT_FAILURES = 8  # consecutive failed flushes after which the file is rebuilt
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0


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
    """The changes since the last commit, and what they mean for reads (pure, in memory)."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        # (handle, id) -> the row as the database would now hold it (None: removed), and
        # the state the database holds for it (None: absent), so counts can be adjusted
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
        """Note a change of (handle, mail_id); its `base` is kept from the first."""
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


T = TypeVar("T")
_ROW = "SELECT id, sender, subject, date, state, size, key FROM messages "
_by_id = attrgetter("mail_id")


class Index:
    def __init__(
        self,
        path: str,
        notify: Callable[..., None] | None = None,
        now: Callable[[], float] = trio.current_time,
        rebuild: "Callable[[Index], None] | None" = None,
    ) -> None:
        self.path = path
        self.now = now  # trio's clock: dates the pending changes and the retry backoff
        self.notify = notify or (lambda kind, **fields: None)
        # Refills a new, empty index from the files (the daemon's start-up gives it);
        # None: a rebuilt index stays empty (tests).
        self.rebuild = rebuild
        self.pending = Pending()
        self.failures = 0  # consecutive failed flushes
        self.last_error: str | None = None
        self.retry_at = 0.0  # the clock's reading before which no flush is tried
        self.rebuilds = 0
        self.needs_rebuild = False  # a failure persisted: rebuild once the loop can
        self.set_aside_reason: str | None = None
        self.fresh = False
        self._rebuilding = False
        self._rebuilt_unproven = False  # rebuilt, and no commit has succeeded since
        self._w: sqlite3.Connection | None = None  # None once closed (see `w`)
        # handle -> [messages, bytes] unread as reads see them: the mailbox limit's O(1)
        # check, counted on first use, then kept by every change.
        self._unread: dict[str, list[int]] = {}
        self._open()

    @property
    def w(self) -> sqlite3.Connection:
        """The connection; what sqlite3 itself raises for a closed one once closed."""
        if self._w is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return self._w

    # ---------------------------------------------------------------- opening

    def _open(self) -> None:
        self.fresh = not os.path.exists(self.path)
        try:
            self._connect(self.path)
            schema = self._db_meta("schema")
            if schema not in (None, SCHEMA_VERSION):
                raise sqlite3.DatabaseError(f"schema version {schema}, not {SCHEMA_VERSION}")
            if schema is None:
                self.w.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        except sqlite3.Error as err:
            self.set_aside(f"cannot open: {err}")

    def _connect(self, path: str) -> None:
        """A connection to `path` (MEMORY: a database in memory) with the tables made."""
        self._w = connect(path)
        self.w.executescript(SCHEMA)
        search.create(self.w)

    def set_aside(self, reason: str) -> None:
        """Move the database aside (kept for a post-mortem) and start an empty one, or one
        in memory when no file can be made; the caller refills it from the files."""
        with contextlib.suppress(sqlite3.Error):
            self.close()
        self._w = None
        self.set_aside_reason = reason
        self._unread.clear()
        self.pending = Pending()
        try:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.replace(self.path + suffix, self.path + suffix + ".damaged")
            self._connect(self.path)
            self.w.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        except (sqlite3.Error, OSError) as err:
            reason = f"{reason}; a new file failed too ({err}): the index is in memory"
            self._connect(MEMORY)
        self.fresh = True
        self.notify("index/failed", error=reason, action="set-aside")

    @property
    def in_memory(self) -> bool:
        return self._w is not None and self.w.execute("PRAGMA database_list").fetchone()[2] == ""

    def close(self) -> None:
        if self._w is not None:
            self.w.close()
            self._w = None

    def close_clean(self) -> bool:
        """Close with everything committed and the WAL folded into the file, so the file
        alone is the index (recovery.seal then stamps it). False if that failed."""
        if self.pending or self.pending.meta or self.in_memory:
            self.close()
            return False
        try:
            self.w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.close()
            return True
        except sqlite3.Error:
            self.close()
            return False

    # ---------------------------------------------------------------- meta

    def _db_meta(self, k: str) -> str | None:
        row = self.w.execute("SELECT v FROM meta WHERE k=?", (k,)).fetchone()
        return row[0] if row else None

    def get_meta(self, k: str) -> str | None:
        if k in self.pending.meta:
            return self.pending.meta[k]
        return self.read(lambda w: self._db_meta(k))

    def set_meta(self, k: str, v: str) -> None:
        self.pending.date(self.now())
        self.pending.meta[k] = v

    # ---------------------------------------------------------------- reads

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A database read (the index's own, and benchd.store.queries'); a failure sets the
        file aside, rebuilds it and reads again."""
        try:
            return fn(self.w)
        except sqlite3.Error as err:
            if self._rebuilding:
                raise
            self.recover_now(f"a read failed: {err}")
            return fn(self.w)

    def quick_check(self) -> str:
        """SQLite's verdict on the file's b-trees ("ok" when sound)."""
        return str(self.w.execute("PRAGMA quick_check").fetchone()[0])

    def get(self, handle: str, mail_id: str) -> MailRow | None:
        k = (handle, mail_id)
        if k in self.pending.rows:
            return self.pending.rows[k]
        row = self.read(lambda w: w.execute(_ROW + "WHERE handle=? AND id=?", k).fetchone())
        return None if row is None else MailRow(*row)

    def find_key(self, sender: str, key: str) -> KeyHit | None:
        hit = self.pending.keys.get((sender, key))
        if hit is not None:
            row = self.pending.rows.get(hit)
            if row is not None:
                return KeyHit(hit[0], hit[1], row.state)
        for handle, mail_id, state in self.read(
            lambda w: w.execute(
                "SELECT handle, id, state FROM messages WHERE sender=? AND key=?", (sender, key)
            ).fetchall()
        ):
            if (handle, mail_id) in self.pending.rows:
                row = self.pending.rows[(handle, mail_id)]
                if row is None:
                    continue
                state = row.state
            return KeyHit(handle, mail_id, state)
        return None

    def count(self, handle: str, state: int | None) -> int:
        """Messages in a mailbox: all of them (state None), or those in `state`."""
        q = "SELECT sum(n) FROM counts WHERE handle=? AND state=ifnull(?, state)"
        (n,) = self.read(lambda w: w.execute(q, (handle, state)).fetchone())
        return int(n or 0) + self.pending.count_delta(handle, state)

    def page(self, handle: str, state: int | None, after: str | None, limit: int) -> list[MailRow]:
        """Up to `limit` rows in send order after the cursor id, plus one to say 'more'."""
        after = after or ""
        touched = self.pending.by_handle.get(handle, set())
        want = limit + 1 + len(touched)  # pending changes may hide that many rows
        if state is None:
            q = _ROW + "WHERE handle=? AND id>? ORDER BY id LIMIT ?"
            args: tuple[str | int, ...] = (handle, after, want)
        else:
            q = _ROW + "WHERE handle=? AND state=? AND id>? ORDER BY id LIMIT ?"
            args = (handle, state, after, want)
        rows = self.read(lambda w: msgspec.convert(w.execute(q, args).fetchall(), list[MailRow]))
        if not touched:
            return rows[: limit + 1]
        rows = [r for r in rows if r.mail_id not in touched]
        for mail_id in touched:
            row = self.pending.rows[(handle, mail_id)]
            if row is not None and mail_id > after and (state is None or row.state == state):
                rows.append(row)
        rows.sort(key=_by_id)
        return rows[: limit + 1]

    def unread_after(self, handle: str, after: str | None, limit: int) -> list[str]:
        return [r.mail_id for r in self.page(handle, UNREAD, after, limit)[:limit]]

    def newest_id(self) -> str | None:
        row = self.read(lambda w: w.execute("SELECT max(id) FROM messages").fetchone())
        ids = [row[0]] if row and row[0] else []
        ids += [k[1] for k, r in self.pending.rows.items() if r is not None]
        return max(ids) if ids else None

    def handles(self) -> list[str]:
        known = set(
            self.read(lambda w: [r[0] for r in w.execute("SELECT DISTINCT handle FROM counts")])
        )
        return sorted(known | set(self.pending.by_handle))

    def unread(self, handle: str) -> tuple[int, int]:
        """How many messages, and how many bytes of bodies, wait unread in a mailbox."""
        tally = self._unread.get(handle)
        if tally is None:
            sizes = self._merged(
                handle,
                f"SELECT id, size FROM messages WHERE handle=? AND state={UNREAD}",
                lambda row: row.size if row.state == UNREAD else None,
            )
            tally = [len(sizes), sum(sizes.values())]
            if sizes or handle in self.pending.by_handle:
                # Kept only for mailboxes with mail: asking about any number of names
                # that have none costs no memory.
                self._unread[handle] = tally
        return tally[0], tally[1]

    def _counted(self, handle: str, before: MailRow | None, after: MailRow | None) -> None:
        tally = self._unread.get(handle)
        if tally is None:
            return  # not counted yet: counted whole on first use
        for row, sign in ((before, -1), (after, 1)):
            if row is not None and row.state == UNREAD:
                tally[0] += sign
                tally[1] += sign * row.size

    def ids(self, handle: str) -> dict[str, int]:
        """Every message of a mailbox and its state (reconcile: O(mailbox), at start)."""
        q = "SELECT id, state FROM messages WHERE handle=?"
        return self._merged(handle, q, lambda row: row.state)

    def _merged(
        self, handle: str, q: str, value: Callable[[MailRow], int | None]
    ) -> dict[str, int]:
        """id -> int of the database's rows of `handle` (`q`), and of its pending rows
        (`value` of each; None leaves it out)."""
        out: dict[str, int] = dict(self.read(lambda w: w.execute(q, (handle,)).fetchall()))
        for mail_id in self.pending.by_handle.get(handle, ()):
            out.pop(mail_id, None)
            row = self.pending.rows[(handle, mail_id)]
            if row is not None and (v := value(row)) is not None:
                out[mail_id] = v
        return out

    # ---------------------------------------------------------------- changes (pending)

    def add(
        self,
        handle: str,
        mail_id: str,
        state: int,
        sender: str,
        subject: str,
        date: str,
        size: int,
        key: str,
        new: bool = False,
    ) -> None:
        """Index a message; one it holds already is left as it is (INSERT OR IGNORE).
        `new`: the id was just handed out by the id clock, so it cannot be indexed yet
        (saves a lookup per send)."""
        if not new and self.get(handle, mail_id) is not None:
            return
        k = (handle, mail_id)
        self.pending.touch(handle, mail_id, None, self.now())  # not in the database
        row = self.pending.rows[k] = MailRow(mail_id, sender, subject, date, state, size, key)
        self._counted(handle, None, row)
        self.pending.keys.setdefault((sender, key), k)
        self.pending.changes.append(Insert(handle, row))

    def add_text(self, handle: str, mail_id: str, meta: FrontMatter, body: bytes | str) -> None:
        """See `AddText` (the rest from the message's front matter). Always follows an
        add() of the message, which dated the pending changes."""
        self.pending.changes.append(
            AddText(handle, mail_id, meta.sender, meta.subject, body, meta.in_reply_to, meta.origin)
        )

    def set_state(self, handle: str, mail_id: str, state: int) -> bool:
        row = self.get(handle, mail_id)
        if row is None or row.state == state:
            return False
        self.pending.touch(handle, mail_id, row.state, self.now())
        new = self.pending.rows[(handle, mail_id)] = msgspec.structs.replace(row, state=state)
        self._counted(handle, row, new)
        self.pending.changes.append(SetState(handle, mail_id, state))
        return True

    def remove(self, handle: str, mail_id: str) -> None:
        row = self.get(handle, mail_id)
        if row is None:
            return
        self.pending.touch(handle, mail_id, row.state, self.now())
        self.pending.rows[(handle, mail_id)] = None
        self._counted(handle, row, None)
        self.pending.changes.append(Remove(handle, mail_id))

    def put_state(self, mail_id: str, cols: mailstates.Columns) -> None:
        """Set delivery-state columns of a sent message (benchd.store.mailstates)."""
        p = self.pending
        p.date(self.now())
        p.states.setdefault(mail_id, {}).update(cols)
        p.changes.append(SetColumns(mail_id, cols))

    def get_state(self, mail_id: str) -> mailstates.StateRow | None:
        row = self.read(lambda w: mailstates.get(w, mail_id))
        over = self.pending.states.get(mail_id)
        if over:
            row = msgspec.structs.replace(row or mailstates.StateRow(mail_id), **over)
        return row

    # ---------------------------------------------------------------- flushing

    def due(self, age_s: float) -> bool:
        """Whether a flush should be tried now: changes older than age_s, past backoff."""
        p = self.pending
        if not p.changes and not p.meta:
            return False
        now = self.now()
        return now >= self.retry_at and now - p.since >= age_s

    def flush_in(self, age_s: float) -> float:
        """Seconds until `due(age_s)` holds for the changes pending now (0: it holds)."""
        now = self.now()
        return max(self.retry_at - now, self.pending.since + age_s - now, 0.0)

    def flush(self) -> bool:
        """Commit the pending changes in one transaction; False (kept, retried with
        backoff) when that failed."""
        p = self.pending
        if not p.changes and not p.meta:
            return True
        try:
            write(self.w, p)
        except sqlite3.Error as err:
            self._rollback()
            self._flush_failed(err)
            return False
        self.pending = Pending()
        self._rebuilt_unproven = False
        if self.failures:
            self.notify("index/recovered", failures=self.failures)
        self.failures, self.last_error, self.retry_at = 0, None, 0.0
        return True

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            if self.w.in_transaction:
                self.w.execute("ROLLBACK")

    def _flush_failed(self, err: Exception) -> None:
        self.failures += 1
        self.last_error = str(err)
        delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (self.failures - 1))
        self.retry_at = self.now() + delay
        corrupt = isinstance(err, sqlite3.Error) and is_corrupt(err)
        persistent = self.failures >= PERSISTENT_FAILURES
        action = "rebuild" if corrupt or persistent else "retry"
        if self.failures == 1 or action == "rebuild" or self.failures % 20 == 0:
            self.notify(
                "index/failed",
                error=str(err),
                action=action,
                pending=len(self.pending),
                failures=self.failures,
            )
        if action == "rebuild":
            self.needs_rebuild = True

    def recover_now(self, reason: str) -> None:
        """Set the file aside and refill a new one from the files (what was pending is in
        them: they are written before any answer). A rebuilt file that fails again before
        any commit (a disk that stays full) is not rebuilt over and over: the index goes
        on in memory."""
        if self._rebuilt_unproven:
            self.set_aside_reason = reason
            self._in_memory(reason)
        else:
            self.set_aside(reason)
        self._rebuilt_unproven = True
        self.needs_rebuild = False
        self.failures, self.retry_at = 0, 0.0
        self.rebuilds += 1
        if self.rebuild is not None:
            self._rebuilding = True
            try:
                self.rebuild(self)
            except sqlite3.Error as err:
                # Even the new file failed while refilling: refill a database in memory.
                self._in_memory(str(err))
                self.rebuild(self)
            finally:
                self._rebuilding = False
        self.flush()  # what the rebuild added; a failure here is retried like any other

    def _in_memory(self, error: str) -> None:
        """Go on with an empty database in memory (the next start rebuilds a file)."""
        self.close()
        self._connect(MEMORY)
        self.pending = Pending()
        self._unread.clear()
        self.notify("index/failed", error=error, action="in-memory")

    def health(self) -> m.IndexHealth:
        return m.IndexHealth(
            state="in-memory" if self.in_memory else "retrying" if self.failures else "ok",
            pending=len(self.pending),
            failures=self.failures,
            error=self.last_error,
            rebuilds=self.rebuilds,
        )
