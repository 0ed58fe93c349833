"""Threads: the messages linked by in-reply-to, found through the stored root of each.

Every indexed message knows its thread's root and its depth below it (`mail_links`,
benchd/store/search.py), so a thread is one indexed range and never a walk from the
root. A thread of at most `cap` messages is answered whole. A longer one is cut to the
neighbourhood of the message asked about: the message, the root, then ring by ring the
nearest ancestor and the nearest replies (breadth first), until `cap` messages are
chosen. Every query reads at most about `cap` rows, so the cost is bounded by the cap,
whatever the thread's depth or size.
"""

import sqlite3
from collections.abc import Iterable

import msgspec

THREAD_MAX = 200  # messages in one answer: the default and the most a caller may ask

_COLS = "SELECT handle, id, sender, in_reply_to FROM mail_links "


class Link(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One message of a thread."""

    handle: str
    mail_id: str
    sender: str
    in_reply_to: str | None


class Slice(msgspec.Struct, frozen=True):
    """A thread, or the part of it an answer holds; what was left out, and where to look."""

    links: list[Link]
    cut: bool = False  # the thread has more messages than `links`
    ancestors_left: int = 0  # ancestors between the root and the oldest one chosen
    replies_left: bool = False  # replies below the message beyond those chosen
    above: str | None = None  # the farthest ancestor chosen (else the parent)
    below: str | None = None  # the deepest reply chosen (else the first reply)


def _links(db: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> list[Link]:
    return msgspec.convert(db.execute(_COLS + sql, args).fetchall(), list[Link])


def thread(db: sqlite3.Connection, mail_id: str, cap: int = THREAD_MAX) -> Slice:
    """The thread of `mail_id` (oldest first), whole or cut to its neighbourhood."""
    me = db.execute(
        "SELECT coalesce(root, id), depth FROM mail_links WHERE id=? LIMIT 1", (mail_id,)
    ).fetchone()
    if me is None:
        return Slice([])
    root, depth = me
    whole = _links(db, "WHERE root=? ORDER BY depth, id LIMIT ?", (root, cap + 1))
    if len(whole) <= cap:
        return Slice(_oldest_first(whole))
    return _neighbourhood(db, mail_id, root, depth, cap)


def _oldest_first(links: Iterable[Link]) -> list[Link]:
    return sorted(links, key=lambda x: (x.mail_id, x.handle))


def _neighbourhood(db: sqlite3.Connection, mail_id: str, root: str, depth: int, cap: int) -> Slice:
    chosen: dict[str, list[Link]] = {}  # id -> its rows (one per mailbox holding it)

    def take(rows: list[Link]) -> None:
        for x in rows:
            chosen.setdefault(x.mail_id, []).append(x)

    me = _links(db, "WHERE id=?", (mail_id,))
    take(me)
    if root != mail_id and len(chosen) < cap:
        take(_links(db, "WHERE id=?", (root,)))
    up = me[0].in_reply_to if me else None
    shown_up = 1 if root in chosen and root != mail_id else 0
    above: str | None = None
    frontier = [mail_id]
    below: str | None = None
    replies_left = False
    while len(chosen) < cap and (up is not None or frontier):
        # One ring: the ancestor at this distance, then the replies at this distance.
        if up is not None and up != root and up not in chosen:
            rows = _links(db, "WHERE id=?", (up,))
            if rows:
                take(rows)
                shown_up += 1
                above = up
                up = rows[0].in_reply_to
            else:
                up = None  # its parent is not indexed (sent elsewhere, or gone)
        else:
            up = None
        if frontier and len(chosen) < cap:
            room = cap - len(chosen)
            marks = ",".join("?" * len(frontier))
            kids = _links(
                db, f"WHERE in_reply_to IN ({marks}) ORDER BY id LIMIT ?", (*frontier, room + 1)
            )
            kids = [x for x in kids if x.mail_id not in chosen]
            ids = list(dict.fromkeys(x.mail_id for x in kids))
            if len(ids) > room:
                replies_left = True
                keep = set(ids[:room])
                kids = [x for x in kids if x.mail_id in keep]
                ids = ids[:room]
            take(kids)
            if ids:
                below = ids[-1]
            frontier = [] if replies_left else ids
    if frontier and not replies_left:
        # The cap was reached with this ring's replies all chosen: are there more below?
        marks = ",".join("?" * len(frontier))
        more = db.execute(
            f"SELECT id FROM mail_links WHERE in_reply_to IN ({marks}) ORDER BY id LIMIT 1",
            tuple(frontier),
        ).fetchone()
        replies_left = more is not None
        if more is not None and below is None:
            below = more[0]  # no reply fitted: the first one left out shows them
    ancestors_left = max(0, depth - shown_up)
    if above is None and me:
        above = me[0].in_reply_to  # no ancestor fitted: the parent shows them
    return Slice(
        _oldest_first(x for rows in chosen.values() for x in rows),
        cut=True,
        ancestors_left=ancestors_left,
        replies_left=replies_left,
        above=above if ancestors_left else None,
        below=below if replies_left else None,
    )
