"""Mail search and thread links: two tables in the index, a cache of the files like it.

- `mail_links`: one row per indexed message (handle, id, sender, in-reply-to). Its
  integer rowid is the message's row in `mail_text`; `in_reply_to` is indexed so a
  thread's replies are found without a scan.
- `mail_text`: an FTS5 table over (subject, body), ranked by bm25 with a subject match
  weighing twice a body match. Which mailbox a row belongs to is in `mail_links`.
- `mail_origins`: for a copy received from another node, its identity there (`origin`,
  benchd.core.mailrefs), indexed both ways: a reply names its parent by that identity.

Everything here runs on the index's one connection, inside the transaction the committer
keeps open (so a message is searchable as soon as its send is answered) or the one
`reconcile` opens. Both tables live in index.sqlite: when the index is set aside and
rebuilt from the files, so are they; `ensure` fills them for messages the index knows
but they do not (an index made before search existed).
"""

import os
import sqlite3

import msgspec

from benchd.core import frontmatter
from benchd.store.statedir import read_regular

VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mail_links(
  rowid INTEGER PRIMARY KEY, handle TEXT NOT NULL, id TEXT NOT NULL,
  sender TEXT NOT NULL, in_reply_to TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS links_by_id ON mail_links(id, handle);
CREATE INDEX IF NOT EXISTS links_by_parent ON mail_links(in_reply_to);
CREATE VIRTUAL TABLE IF NOT EXISTS mail_text USING fts5(subject, body);
CREATE TABLE IF NOT EXISTS mail_origins(
  id TEXT NOT NULL, handle TEXT NOT NULL, origin TEXT NOT NULL, PRIMARY KEY(id, handle));
CREATE INDEX IF NOT EXISTS origins_by_origin ON mail_origins(origin);
"""

_LINK = "INSERT OR IGNORE INTO mail_links(handle, id, sender, in_reply_to) VALUES (?,?,?,?)"
_ORIGIN = "INSERT OR IGNORE INTO mail_origins(id, handle, origin) VALUES (?,?,?)"
SNIPPET_TOKENS = 12
THREAD_MAX = 200  # messages in one thread answer


class BadQuery(ValueError):
    """A search query that has no words to look for."""


def create(db: sqlite3.Connection) -> None:
    for stmt in _SCHEMA.strip().split(";"):
        if stmt.strip():
            db.execute(stmt)


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
    row = (handle, mail_id, sender, in_reply_to)
    try:
        cur = db.execute(_LINK, row)
    except sqlite3.OperationalError:
        create(db)  # an index opened without `ensure` (tools, tests): make the tables
        cur = db.execute(_LINK, row)
    if not cur.rowcount:
        return
    if origin is not None:
        try:
            db.execute(_ORIGIN, (mail_id, handle, origin))
        except sqlite3.OperationalError:
            create(db)  # an index made before origins were kept
            db.execute(_ORIGIN, (mail_id, handle, origin))
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    db.execute(
        "INSERT INTO mail_text(rowid, subject, body) VALUES (?,?,?)",
        (cur.lastrowid, subject, body),
    )


def remove(db: sqlite3.Connection, handle: str, mail_id: str) -> None:
    try:
        row = db.execute(
            "SELECT rowid FROM mail_links WHERE id=? AND handle=?", (mail_id, handle)
        ).fetchone()
    except sqlite3.OperationalError:
        return  # no tables yet: nothing indexed to remove
    if row is not None:
        db.execute("DELETE FROM mail_text WHERE rowid=?", (row[0],))
        db.execute("DELETE FROM mail_links WHERE rowid=?", (row[0],))
        try:
            db.execute("DELETE FROM mail_origins WHERE id=? AND handle=?", (mail_id, handle))
        except sqlite3.OperationalError:
            pass  # an index made before origins were kept: none to remove


def ensure(index, mail_root: str) -> int:
    """Create the tables, and index every message the index knows but they do not.

    Costs one anti-join when they are complete (every start after the first); reads the
    files only of messages missing (an index from before search existed). Returns how
    many it added.
    """
    db = index.w
    own = not db.in_transaction
    if own:
        db.execute("BEGIN IMMEDIATE")
    try:
        create(db)
        added = 0
        if index.get_meta("search") != VERSION:
            missing = db.execute(
                "SELECT handle, id, state FROM messages m WHERE NOT EXISTS "
                "(SELECT 1 FROM mail_links l WHERE l.id = m.id AND l.handle = m.handle)"
            ).fetchall()
            for handle, mail_id, state in missing:
                sub = "read" if state else "inbox"
                try:
                    path = os.path.join(mail_root, handle, sub, mail_id + ".md")
                    meta, body = frontmatter.parse(read_regular(path))
                except (OSError, frontmatter.BadMailFile, UnicodeDecodeError):
                    continue  # reconcile drops what it cannot read; so does search
                add(
                    db,
                    handle,
                    mail_id,
                    meta["from"],
                    meta.get("subject", ""),
                    body,
                    meta.get("in-reply-to"),
                    meta.get("origin"),
                )
                added += 1
            index.set_meta("search", VERSION)
        if own:
            db.execute("COMMIT")
        return added
    except BaseException:
        if own and db.in_transaction:
            db.execute("ROLLBACK")
        raise


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


class Place(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """Where a message is, and what it answers."""

    handle: str
    in_reply_to: str | None
    sender: str


class Link(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One message of a thread."""

    handle: str
    mail_id: str
    sender: str
    in_reply_to: str | None


def match_expr(query: str) -> str:
    """A user's words as an FTS5 expression: every word must occur (in subject or body).

    Words are taken literally (quoted), so punctuation such as `fix-up` or `a.b` needs no
    FTS5 syntax; a word ending in `*` matches as a prefix (`deploy*`).
    """
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
    """Best matches first.

    Up to `limit` + 1 rows, so the caller can say there were more. `senders`: the
    spellings of one sender's address (`alice` and `alice@<this node>`).
    """
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
    args: list = [expr]
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
    try:
        rows = db.execute(
            f"SELECT id, in_reply_to FROM mail_links WHERE handle=? AND id IN ({marks}) "
            "AND in_reply_to IS NOT NULL",
            (handle, *ids),
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    return dict(rows)


def locate(db: sqlite3.Connection, mail_id: str) -> list[Place]:
    """Where a message is (an id names one message)."""
    return msgspec.convert(
        db.execute(
            "SELECT handle, in_reply_to, sender FROM mail_links WHERE id=?", (mail_id,)
        ).fetchall(),
        list[Place],
    )


def thread(db: sqlite3.Connection, mail_id: str) -> list[Link]:
    """The conversation `mail_id` belongs to, oldest first.

    Up from the message through its in-reply-to links to the first message still known,
    then down through every reply to it (breadth first, at most THREAD_MAX messages).
    A link may name a message by its identity on another node: `named` and `names`
    resolve those to this node's copies.
    """
    root = mail_id
    seen = {mail_id}
    while True:
        row = db.execute("SELECT in_reply_to FROM mail_links WHERE id=?", (root,)).fetchone()
        parent = None if row is None or row[0] is None else next(iter(named(db, row[0])), None)
        if parent is None or parent in seen:
            break
        if db.execute("SELECT 1 FROM mail_links WHERE id=?", (parent,)).fetchone() is None:
            break  # its parent is not indexed (sent from elsewhere): this is the top
        root = parent
        seen.add(root)
    found: dict[tuple[str, str], tuple] = {}
    frontier = [root]
    visited: set[str] = set()
    while frontier and len(found) < THREAD_MAX:
        nxt = []
        for mid in frontier:
            if mid in visited:
                continue
            visited.add(mid)
            for r in db.execute(
                "SELECT handle, id, sender, in_reply_to FROM mail_links WHERE id=?", (mid,)
            ):
                found[(r[1], r[0])] = r
            for ref in names(db, mid):
                for r in db.execute(
                    "SELECT handle, id, sender, in_reply_to FROM mail_links WHERE in_reply_to=? "
                    "ORDER BY id LIMIT ?",
                    (ref, THREAD_MAX),
                ):
                    found[(r[1], r[0])] = r
                    nxt.append(r[1])
        frontier = nxt
    rows = sorted(found.values(), key=lambda r: (r[1], r[0]))[:THREAD_MAX]
    return msgspec.convert(rows, list[Link])


def named(db: sqlite3.Connection, ref: str) -> list[str]:
    """The ids here of the message a reference names: a bare id is itself; `<id>@<node>`
    (a message sent from another node) names the copies received with that origin."""
    if "@" not in ref:
        return [ref]
    try:
        rows = db.execute(
            "SELECT id FROM mail_origins WHERE origin=? ORDER BY id", (ref,)
        ).fetchall()
    except sqlite3.OperationalError:
        return []  # an index made before origins were kept
    return [r[0] for r in rows]


def names(db: sqlite3.Connection, mail_id: str) -> list[str]:
    """Every reference that may name the message `mail_id`: its id, and the origin of a
    copy received from another node (what replies written on other nodes name)."""
    try:
        rows = db.execute("SELECT origin FROM mail_origins WHERE id=?", (mail_id,)).fetchall()
    except sqlite3.OperationalError:
        rows = []
    return [mail_id, *dict.fromkeys(r[0] for r in rows)]


def origin_of(db: sqlite3.Connection, mail_id: str) -> str | None:
    """The identity on its node of a copy received from another node; None for mail
    sent from this node."""
    return next(iter(names(db, mail_id)[1:]), None)
