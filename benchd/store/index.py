"""The mail index: SQLite, so send, list and read cost O(page) / O(log n), not O(mailbox).

A cache the files in mail/ can rebuild (docs/durability.md, "The index is a cache"), in
two layers, both used on the event loop only: `pending` in memory (every change since
the last commit; it cannot fail, so an answered send is found whatever SQLite does;
reads merge it over the database), and the database, written by `flush()` in one
transaction (benchd.store.indexdb). Every failure and rebuild goes to `notify`.
"""

import os
import sqlite3
from collections.abc import Callable
from operator import attrgetter
from typing import Literal, TypeVar

import msgspec
import trio

from bench_wire import messages as m
from benchd.core.frontmatter import FrontMatter
from benchd.store import indexdb, mailstates, search
from benchd.store.indexdb import MEMORY, AddText, Insert, Remove, SetColumns, SetState

# Re-exported: the runtime and the server import the states, rows and Pending from here.
from benchd.store.indexdb import READ as READ
from benchd.store.indexdb import UNREAD as UNREAD
from benchd.store.indexdb import KeyHit as KeyHit
from benchd.store.indexdb import MailRow as MailRow
from benchd.store.indexdb import Pending as Pending
from benchd.store.indexdb import is_corrupt as is_corrupt

SCHEMA_VERSION = indexdb.SCHEMA_VERSION
STATE_NAMES: dict[int, Literal["unread", "read"]] = {UNREAD: "unread", READ: "read"}
PERSISTENT_FAILURES = 8  # consecutive failed flushes after which the file is rebuilt
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0


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
        self._w = indexdb.connect(path)
        self.w.executescript(indexdb.SCHEMA)
        search.create(self.w)

    def set_aside(self, reason: str) -> None:
        """Move the database aside (kept for a post-mortem) and start an empty one, or one
        in memory when no file can be made; the caller refills it from the files."""
        if self._w is not None:
            try:
                self.w.close()
            except sqlite3.Error:
                pass
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
        return self._read(lambda: self._db_meta(k))

    def set_meta(self, k: str, v: str) -> None:
        self.pending.date(self.now())
        self.pending.meta[k] = v

    # ---------------------------------------------------------------- reads

    def _read(self, fn: Callable[[], T]) -> T:
        """A database read; a failure sets the file aside, rebuilds it and reads again."""
        try:
            return fn()
        except sqlite3.Error as err:
            if self._rebuilding:
                raise
            self.recover_now(f"a read failed: {err}")
            return fn()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read by another store module (benchd.store.queries), under the same rule."""
        return self._read(lambda: fn(self.w))

    def quick_check(self) -> str:
        """SQLite's verdict on the file's b-trees ("ok" when sound)."""
        return str(self.w.execute("PRAGMA quick_check").fetchone()[0])

    def _db_row(self, handle: str, mail_id: str) -> MailRow | None:
        row = self.w.execute(_ROW + "WHERE handle=? AND id=?", (handle, mail_id)).fetchone()
        return None if row is None else MailRow(*row)

    def get(self, handle: str, mail_id: str) -> MailRow | None:
        k = (handle, mail_id)
        if k in self.pending.rows:
            return self.pending.rows[k]
        return self._read(lambda: self._db_row(handle, mail_id))

    def find_key(self, sender: str, key: str) -> KeyHit | None:
        hit = self.pending.keys.get((sender, key))
        if hit is not None:
            row = self.pending.rows.get(hit)
            if row is not None:
                return KeyHit(hit[0], hit[1], row.state)
        for handle, mail_id, state in self._read(
            lambda: self.w.execute(
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
        (n,) = self._read(lambda: self.w.execute(q, (handle, state)).fetchone())
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
        rows = self._read(
            lambda: msgspec.convert(self.w.execute(q, args).fetchall(), list[MailRow])
        )
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
        row = self._read(lambda: self.w.execute("SELECT max(id) FROM messages").fetchone())
        ids = [row[0]] if row and row[0] else []
        ids += [k[1] for k, r in self.pending.rows.items() if r is not None]
        return max(ids) if ids else None

    def handles(self) -> list[str]:
        known = set(
            self._read(lambda: [r[0] for r in self.w.execute("SELECT DISTINCT handle FROM counts")])
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
        out: dict[str, int] = dict(self._read(lambda: self.w.execute(q, (handle,)).fetchall()))
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

    def add_text(
        self,
        handle: str,
        mail_id: str,
        sender: str,
        subject: str,
        body: bytes | str,
        meta: FrontMatter,
    ) -> None:
        """See `AddText`; `meta` gives its links. Always follows an add() of the message,
        which dated the pending changes."""
        self.pending.changes.append(
            AddText(handle, mail_id, sender, subject, body, meta.in_reply_to, meta.origin)
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
        row = self._read(lambda: mailstates.get(self.w, mail_id))
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
            indexdb.write(self.w, p)
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
        try:
            if self.w.in_transaction:
                self.w.execute("ROLLBACK")
        except sqlite3.Error:
            pass

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
