"""The index's query API over the search tables (benchd/store/search.py), with the rules
no caller repeats: messages not committed yet are in the index's pending layer, not in
the tables, so `locate` and `thread` add them (what `mail read` returns `mail thread`
finds too); a failed read is the index's to handle (`Index.read`); a search, a thread or
a lookup by id first commits what is pending (when its backoff allows).

A thread is one indexed range of its root; one longer than `cap` is cut to the message's
neighbourhood, ring by ring (docs/cli.md, `mail thread`), reading about `cap` rows.
"""

import sqlite3
from collections.abc import Callable, Iterable
from typing import TypeVar

import msgspec

from benchd.store import search
from benchd.store.index import AddText, Index
from benchd.store.search import Link

THREAD_MAX = 200  # messages in one answer: the default and the most a caller may ask

_COLS = "SELECT handle, id, sender, in_reply_to FROM mail_links "


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


T = TypeVar("T")


class MailQueries:
    """The search module's queries (each documented there) under the rules above."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def _committed(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        index = self.index
        if index.pending.changes and index.due(0):
            index.flush()
        return index.read(fn)

    def parents(self, handle: str, ids: list[str]) -> dict[str, str]:
        """in-reply-to of those of `ids` in `handle`'s mailbox that have one."""
        return self.index.read(lambda w: search.parents(w, handle, ids))

    def locate(self, mail_id: str) -> list[Link]:
        """Where a message is: each mailbox holding a copy (an id names one message)."""
        found = self._committed(lambda w: _links(w, "WHERE id=?", (mail_id,)))
        if found or not self.index.pending.changes:
            return found
        return self._uncommitted().get(mail_id, [])

    def thread(self, mail_id: str, cap: int) -> Slice:
        """The neighbourhood of a message in its thread, at most `cap` messages."""
        part = self._committed(lambda w: thread(w, mail_id, cap))
        if not self.index.pending.changes:
            return part
        return self._with_uncommitted(part, mail_id, cap)

    def _uncommitted(self) -> dict[str, list[Link]]:
        """The messages in the pending layer (not committed yet), by id: their links."""
        rows = self.index.pending.rows
        out: dict[str, list[Link]] = {}
        for c in self.index.pending.changes:  # AddText: links, unless removed since
            if isinstance(c, AddText) and rows.get((c.handle, c.mail_id)) is not None:
                out.setdefault(c.mail_id, []).append(
                    Link(c.handle, c.mail_id, c.sender, c.in_reply_to)
                )
        return out

    def _with_uncommitted(self, part: Slice, mail_id: str, cap: int) -> Slice:
        """`part` with the uncommitted messages of the thread added: the message itself
        and its uncommitted ancestors (up to the first committed one, whose committed
        thread is taken), and the uncommitted replies to any of them. Bounded by `cap`:
        at most `cap` steps up, and the answer cut to `cap` messages around the message."""
        held = self._uncommitted()
        links = {(x.handle, x.mail_id): x for x in part.links}
        cut = part.cut
        if held and not any(x.mail_id == mail_id for x in part.links):
            up: str | None = mail_id
            for _ in range(cap):
                if up is None or up not in held:
                    break
                for x in held[up]:
                    links[(x.handle, x.mail_id)] = x
                up = held[up][0].in_reply_to
            if up is not None and up not in held:  # committed: its thread from the tables
                above = self._committed(lambda w: thread(w, up, cap))
                links.update({(x.handle, x.mail_id): x for x in above.links})
                cut = cut or above.cut
            elif up is not None:  # more uncommitted ancestors than `cap`
                cut = True
        ids = {k[1] for k in links}
        grew = bool(ids)
        while grew and len(ids) <= cap:  # uncommitted replies, ring by ring
            grew = False
            for rid, copies in held.items():
                if rid not in ids and copies[0].in_reply_to in ids:
                    ids.add(rid)
                    links.update({(x.handle, x.mail_id): x for x in copies})
                    grew = True
        if len(links) == len(part.links):
            return part
        ordered = sorted(links.values(), key=lambda x: (x.mail_id, x.handle))
        if len({x.mail_id for x in ordered}) <= cap:
            return Slice(ordered, cut=cut)
        at = next((i for i, x in enumerate(ordered) if x.mail_id == mail_id), 0)
        lo = max(0, min(at - cap // 2, len(ordered) - cap))
        return Slice(ordered[lo : lo + cap], cut=True)

    def search(
        self,
        query: str,
        handle: str | None,
        senders: list[str] | None,
        since: str | None,
        limit: int,
    ) -> list[search.Hit]:
        return self._committed(lambda w: search.search(w, query, handle, senders, since, limit))

    def origin_of(self, mail_id: str) -> str | None:
        return self._committed(lambda w: search.origin_of(w, mail_id))

    def named(self, ref: str) -> list[str]:
        return self._committed(lambda w: search.named(w, ref))
