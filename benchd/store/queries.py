"""The index's query API over the search tables (benchd/store/search.py, threads.py):
what the mail handlers ask of it, with no SQL or connection in sight.

Two rules apply, and they live here so no caller repeats them:

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
from typing import TypeVar

from benchd.store import search, threads
from benchd.store.index import Index

T = TypeVar("T")


class MailQueries:
    def __init__(self, index: Index) -> None:
        self.index = index

    def _committed(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        index = self.index
        if index.pending.ops and index.due(0):
            index.flush()
        return index.read(fn)

    def parents(self, handle: str, ids: list[str]) -> dict[str, str]:
        """in-reply-to of those of `ids` in `handle`'s mailbox that have one."""
        return self.index.read(lambda w: search.parents(w, handle, ids))

    def locate(self, mail_id: str) -> list[search.Place]:
        """Where a message is: each mailbox holding a copy (an id names one message)."""
        return self._committed(lambda w: search.locate(w, mail_id))

    def thread(self, mail_id: str, cap: int) -> threads.Slice:
        """The neighbourhood of a message in its thread, at most `cap` messages."""
        return self._committed(lambda w: threads.thread(w, mail_id, cap))

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
