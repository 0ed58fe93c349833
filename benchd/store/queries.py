"""The index's query API over the search tables (benchd/store/search.py, threads.py):
what the mail handlers ask of it, with no SQL or connection in sight.

Two rules apply, and they live here so no caller repeats them:

- Messages the index holds but could not commit yet (a full disk, a lock held
  elsewhere) are in its pending layer, not in the search tables: `locate` and `thread`
  add them (`_uncommitted`), so a message `mail read` returns is found by `mail thread`
  too, while commits fail.
- A failed read is the index's to handle (`Index.read`: corruption sets the file aside
  and rebuilds it from the files, then the read runs again).
- The search tables are written with the index's commits, so a search, a thread or a
  lookup by id first commits what is pending (when its backoff allows): a message whose
  send was answered is found. A listing's parents (`parents`) skip that commit: a page
  of mail is the fast path, and a listing never promised the links of mail sent a
  moment ago (the committer commits them within INDEX_COMMIT_S).
"""

import sqlite3
from collections.abc import Callable
from typing import TypeVar, assert_never

from benchd.store import search, threads
from benchd.store.index import Index
from benchd.store.pending import AddText, Insert, Remove, SetColumns, SetState

T = TypeVar("T")


class MailQueries:
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

    def locate(self, mail_id: str) -> list[search.Place]:
        """Where a message is: each mailbox holding a copy (an id names one message)."""
        found = self._committed(lambda w: search.locate(w, mail_id))
        if found or not self.index.pending.changes:
            return found
        held = self._uncommitted().get(mail_id, [])
        return [search.Place(x.handle, x.in_reply_to, x.sender) for x in held]

    def thread(self, mail_id: str, cap: int) -> threads.Slice:
        """The neighbourhood of a message in its thread, at most `cap` messages."""
        part = self.thread_committed(mail_id, cap)
        if not self.index.pending.changes:
            return part
        return self._with_uncommitted(part, mail_id, cap)

    def thread_committed(self, mail_id: str, cap: int) -> threads.Slice:
        return self._committed(lambda w: threads.thread(w, mail_id, cap))

    def _uncommitted(self) -> dict[str, list[threads.Link]]:
        """The messages in the pending layer (not committed yet), by id: their links."""
        rows = self.index.pending.rows
        out: dict[str, list[threads.Link]] = {}
        for change in self.index.pending.changes:
            match change:
                case AddText(handle, mail_id, sender, _, _, in_reply_to):
                    if rows.get((handle, mail_id)) is not None:  # not removed since
                        out.setdefault(mail_id, []).append(
                            threads.Link(handle, mail_id, sender, in_reply_to)
                        )
                case Insert() | SetState() | SetColumns() | Remove():
                    pass  # no links
                case _:
                    assert_never(change)
        return out

    def _with_uncommitted(self, part: threads.Slice, mail_id: str, cap: int) -> threads.Slice:
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
                above = self.thread_committed(up, cap)
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
            return threads.Slice(ordered, cut=cut)
        at = next((i for i, x in enumerate(ordered) if x.mail_id == mail_id), 0)
        lo = max(0, min(at - cap // 2, len(ordered) - cap))
        return threads.Slice(ordered[lo : lo + cap], cut=True)

    def search(
        self,
        query: str,
        handle: str | None,
        senders: list[str] | None,
        since: str | None,
        limit: int,
    ) -> list[search.Hit]:
        """Best matches first, up to `limit` + 1 (so the caller can say there were more);
        raises search.BadQuery."""
        return self._committed(lambda w: search.search(w, query, handle, senders, since, limit))

    def origin_of(self, mail_id: str) -> str | None:
        """The identity on its node of a copy received from another node; None for mail
        sent from this node."""
        return self._committed(lambda w: search.origin_of(w, mail_id))

    def named(self, ref: str) -> list[str]:
        """The ids here of the message a reference (`<id>` or `<id>@<node>`) names."""
        return self._committed(lambda w: search.named(w, ref))
