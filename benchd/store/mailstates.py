"""The delivery states of sent mail: one row per message in index.sqlite (`mail_states`),
filled from the events the daemon logs anyway (benchd.runtime.tracking) and written in
the index transaction of the `last_seq` they belong to, so a start after a crash
re-applies exactly the events the file missed. Times are wall ms.
"""

import sqlite3
from typing import TypedDict

import msgspec

from benchd.core.delivery import StateRow as StateRow  # the row, read by the pure core too


class Columns(TypedDict, total=False):
    """Columns of a message's row to set (`write`): a StateRow's fields but its id, each
    of its type (an event sets the few it speaks of)."""

    sender: str
    rcpt: str
    sent: int
    queued: int
    delivered: int
    woken: int
    nw_reason: str
    nw_at: int
    nw_until: int | None
    active: int
    read_at: int
    read_by: str
    reader: str
    replied_at: int
    reply: str
    node: str


SCHEMA = """
CREATE TABLE IF NOT EXISTS mail_states(
  id TEXT PRIMARY KEY, sender TEXT, rcpt TEXT, sent INTEGER, queued INTEGER,
  delivered INTEGER, woken INTEGER, nw_reason TEXT, nw_at INTEGER, nw_until INTEGER,
  active INTEGER, read_at INTEGER, read_by TEXT, reader TEXT, replied_at INTEGER,
  reply TEXT, node TEXT) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS states_by_sender ON mail_states(sender, id);
"""


_SELECT = "SELECT " + ", ".join(StateRow.__struct_fields__) + " FROM mail_states "


def write(db: sqlite3.Connection, mail_id: str, cols: Columns) -> None:
    """Set these columns of a message's row (made if absent)."""
    names = list(cols)
    marks = ",".join("?" * (len(names) + 1))
    sets = ",".join(f"{n}=excluded.{n}" for n in names)
    db.execute(
        f"INSERT INTO mail_states(id,{','.join(names)}) VALUES ({marks}) "  # noqa: S608 - names are StateRow fields
        f"ON CONFLICT(id) DO UPDATE SET {sets}",
        (mail_id, *cols.values()),
    )


def get(db: sqlite3.Connection, mail_id: str) -> StateRow | None:
    row = db.execute(_SELECT + "WHERE id=?", (mail_id,)).fetchone()
    return None if row is None else msgspec.convert(row, StateRow)


def by_sender(
    db: sqlite3.Connection, sender: str | None, to: str | None, cap: int
) -> list[StateRow]:
    """Up to `cap` rows, newest first (ids sort by send time); `sender` None: anyone's."""
    where: list[str] = []
    args: list[str] = []
    if sender is not None:
        where.append("sender=?")
        args.append(sender)
    if to is not None:
        where.append("rcpt=?")
        args.append(to)
    q = _SELECT + (("WHERE " + " AND ".join(where)) if where else "") + " ORDER BY id DESC LIMIT ?"
    rows = db.execute(q, (*args, cap)).fetchall()
    return msgspec.convert(rows, list[StateRow])


def replies(db: sqlite3.Connection, mail_ids: list[str]) -> dict[str, str]:
    """The first reply (by id) indexed for each of these messages, from the thread links,
    counting only a reply from the message's own recipient (its row's `rcpt`): anyone
    may write an in-reply-to, and a stranger's answer makes nothing `replied`."""
    out: dict[str, str] = {}
    for i in range(0, len(mail_ids), 500):
        chunk = mail_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for parent, child in db.execute(
            "SELECT l.in_reply_to, min(l.id) FROM mail_links l "  # noqa: S608 - marks only
            "JOIN mail_states s ON s.id = l.in_reply_to "
            f"WHERE l.in_reply_to IN ({marks}) AND l.sender = s.rcpt "
            "GROUP BY l.in_reply_to",
            chunk,
        ):
            out[parent] = child
    return out
