"""Mail search and thread links: tables in index.sqlite, made with the index's own
(`create`), a cache of the files like it.

`mail_links` (a row per indexed message: its parent, and its thread's root and depth, so
a thread is one indexed range: benchd/store/queries.py), `mail_text` (FTS5 over subject
and body; its rowid is the link's) and `mail_origins` (a copy from another node by its
identity there, benchd.core.names: a reply names its parent by it).
"""

import sqlite3

import msgspec

VERSION = "2"  # 2: each link holds its thread's root and its depth

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mail_links(
  rowid INTEGER PRIMARY KEY, handle TEXT NOT NULL, id TEXT NOT NULL,
  sender TEXT NOT NULL, in_reply_to TEXT, root TEXT, depth INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX IF NOT EXISTS links_by_id ON mail_links(id, handle);
CREATE INDEX IF NOT EXISTS links_by_parent ON mail_links(in_reply_to);
CREATE VIRTUAL TABLE IF NOT EXISTS mail_text USING fts5(subject, body);
CREATE TABLE IF NOT EXISTS mail_origins(
  id TEXT NOT NULL, handle TEXT NOT NULL, origin TEXT NOT NULL, PRIMARY KEY(id, handle));
CREATE INDEX IF NOT EXISTS origins_by_origin ON mail_origins(origin);
CREATE INDEX IF NOT EXISTS links_by_root ON mail_links(root, depth, id);
"""

_LINK = (
    "INSERT OR IGNORE INTO mail_links(handle, id, sender, in_reply_to, root, depth) "
    "VALUES (?,?,?,?,?,?)"
)
# Replies indexed before the message they answer (reconcile meets files in any order;
# mail from another node may come first) were the roots of their own threads: they and
# everything below them join this message's thread.
_ADOPT = (
    "UPDATE mail_links SET root=?, depth=depth+? WHERE root IN "
    "(SELECT id FROM mail_links WHERE in_reply_to=? AND root=id AND id<>?)"
)
_HAS_REPLY = "SELECT 1 FROM mail_links WHERE in_reply_to=? LIMIT 1"
_ORIGIN = "INSERT OR IGNORE INTO mail_origins(id, handle, origin) VALUES (?,?,?)"
SNIPPET_TOKENS = 12


class BadQuery(ValueError):
    """A search query that has no words to look for."""


def create(db: sqlite3.Connection) -> None:
    cols = {r[1] for r in db.execute("PRAGMA table_info(mail_links)")}
    if cols and "root" not in cols:
        # Made before threads had roots: refilled from the files (`ensure_search`), like
        # any message the tables lack.
        db.execute("DROP TABLE mail_links")
        db.execute("DROP TABLE IF EXISTS mail_text")
    for stmt in _SCHEMA.strip().split(";"):
        if stmt.strip():
            db.execute(stmt)


def _place(db: sqlite3.Connection, mail_id: str, in_reply_to: str | None) -> tuple[str, int]:
    """The root and depth of a new message: under its parent when that is indexed."""
    if in_reply_to is not None and in_reply_to != mail_id:
        row = db.execute(
            "SELECT coalesce(root, id), depth FROM mail_links WHERE id=? LIMIT 1", (in_reply_to,)
        ).fetchone()
        if row is not None:
            return row[0], row[1] + 1
    return mail_id, 0


def add(
    db: sqlite3.Connection,
    handle: str,
    mail_id: str,
    sender: str,
    subject: str,
    body: bytes | str,
    in_reply_to: str | None,
    origin: str | None = None,
) -> None:
    """Index one message (a no-op when it is indexed already)."""
    # A reference to a message sent from another node (`<id>@<node>`) is linked to this
    # node's copy of it when there is one (else kept, and rewritten when the copy
    # arrives: below).
    if in_reply_to is not None and "@" in in_reply_to:
        in_reply_to = next(iter(named(db, in_reply_to)), in_reply_to)
    root, depth = _place(db, mail_id, in_reply_to)
    cur = db.execute(_LINK, (handle, mail_id, sender, in_reply_to, root, depth))
    if not cur.rowcount:
        return
    if origin is not None:
        db.execute(_ORIGIN, (mail_id, handle, origin))
        # Replies indexed first named this copy by its identity on its node: they name
        # it by its id here from now on, so the thread queries follow local ids only.
        db.execute("UPDATE mail_links SET in_reply_to=? WHERE in_reply_to=?", (mail_id, origin))
    # Nearly always no reply came first: the cheap look by `links_by_parent` spares the
    # UPDATE's write cursors (measured: 18-35 us a send, a quarter of the index's flush).
    if db.execute(_HAS_REPLY, (mail_id,)).fetchone() is not None:
        db.execute(_ADOPT, (root, depth + 1, mail_id, root))
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    db.execute(
        "INSERT INTO mail_text(rowid, subject, body) VALUES (?,?,?)",
        (cur.lastrowid, subject, body),
    )


def remove(db: sqlite3.Connection, handle: str, mail_id: str) -> None:
    row = db.execute(
        "SELECT rowid FROM mail_links WHERE id=? AND handle=?", (mail_id, handle)
    ).fetchone()
    if row is not None:
        db.execute("DELETE FROM mail_text WHERE rowid=?", (row[0],))
        db.execute("DELETE FROM mail_links WHERE rowid=?", (row[0],))
        db.execute("DELETE FROM mail_origins WHERE id=? AND handle=?", (mail_id, handle))


# ---------------------------------------------------------------- queries


class Hit(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One search match (built from the query's row in C, like the index's MailRow)."""

    handle: str
    mail_id: str
    sender: str
    subject: str
    date: str
    state: int
    size: int
    snippet: str


class Link(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One message's row of the links: where it is, who sent it, what it answers."""

    handle: str
    mail_id: str
    sender: str
    in_reply_to: str | None


def match_expr(query: str) -> str:
    """A user's words as an FTS5 expression: every word must occur (in subject or body),
    taken literally (`fix-up`, `a.b`); a word ending in `*` matches as a prefix."""
    terms = []
    for word in query.split():
        prefix = word.endswith("*")
        word = word.rstrip("*")
        if not word:
            continue
        terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    if not terms:
        raise BadQuery("the query has no words to search for")
    return " AND ".join(terms)


def search(
    db: sqlite3.Connection,
    query: str,
    handle: str | None,
    senders: list[str] | None,
    since: str | None,
    limit: int,
) -> list[Hit]:
    """Best matches first, up to `limit` + 1 (the caller says there were more).
    `senders`: the spellings of one sender's address (`alice`, `alice@<this node>`)."""
    # The mailbox is a filter on the joined row, not a phrase in the MATCH: a phrase of
    # the handle would be in every message of a big mailbox, and intersecting its
    # posting list costs O(mailbox) per query.
    expr = match_expr(query)
    sql = [
        "SELECT l.handle, l.id, msg.sender, msg.subject, msg.date, msg.state, msg.size, "
        f"snippet(mail_text, 1, '[', ']', '…', {SNIPPET_TOKENS}) "
        "FROM mail_text JOIN mail_links l ON l.rowid = mail_text.rowid "
        "JOIN messages msg ON msg.handle = l.handle AND msg.id = l.id "
        "WHERE mail_text MATCH ? AND rank MATCH 'bm25(2.0, 1.0)'"
    ]
    args: list[object] = [expr]
    if handle is not None:
        sql.append("AND l.handle = ?")
        args.append(handle)
    if senders:
        sql.append("AND l.sender IN (" + ",".join("?" * len(senders)) + ")")
        args += senders
    if since is not None:
        sql.append("AND msg.date >= ?")
        args.append(since)
    sql.append("ORDER BY rank LIMIT ?")
    args.append(limit + 1)
    try:
        return msgspec.convert(db.execute(" ".join(sql), args).fetchall(), list[Hit])
    except sqlite3.OperationalError as err:
        raise BadQuery(f"the query could not be searched: {err}") from None


def parents(db: sqlite3.Connection, handle: str, ids: list[str]) -> dict[str, str]:
    """in-reply-to of those of `ids` (one listing page) in `handle`'s mailbox that have one."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(
        f"SELECT id, in_reply_to FROM mail_links WHERE handle=? AND id IN ({marks}) "
        "AND in_reply_to IS NOT NULL",
        (handle, *ids),
    ).fetchall()
    return dict(rows)


def named(db: sqlite3.Connection, ref: str) -> list[str]:
    """The ids here of the message a reference names: a bare id is itself; `<id>@<node>`
    (a message sent from another node) names the copies received with that origin."""
    if "@" not in ref:
        return [ref]
    rows = db.execute("SELECT id FROM mail_origins WHERE origin=? ORDER BY id", (ref,))
    return [r[0] for r in rows]


def origin_of(db: sqlite3.Connection, mail_id: str) -> str | None:
    """The identity on its node of a copy received from another node (what replies
    written on other nodes name); None for mail sent from this node."""
    row = db.execute("SELECT origin FROM mail_origins WHERE id=? LIMIT 1", (mail_id,))
    return next((r[0] for r in row), None)
