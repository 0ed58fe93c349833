"""The index's in-memory layer: the changes since the last commit, and what they mean
for reads (pure, in memory). The index (benchd/store/index.py) merges it over SQLite."""

import msgspec

from benchd.store.mailstates import Columns

UNREAD, READ = 0, 1


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


# The index's changes, one small frozen value per kind: what `Index._write` writes to
# SQLite at the next flush (and `store/queries.py` reads for uncommitted threads).


class Insert(msgspec.Struct, frozen=True, gc=False):
    """A message indexed (INSERT OR IGNORE: one already there is left as it is)."""

    handle: str
    mail_id: str
    state: int
    sender: str
    subject: str
    date: str
    size: int
    key: str


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
    """The changes since the last commit, and what they mean for reads (pure, in memory).

    `rows` maps (handle, id) to the row as the database would now hold it, or None when
    it was removed; `base`
    the state the database holds for it (None: absent), so counts can be adjusted.
    """

    def __init__(self) -> None:
        self.changes: list[Change] = []
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

    def touch(self, handle: str, mail_id: str, base: int | None, now: float) -> None:
        """Note a change of (handle, mail_id); `now` (the index's clock) dates the first."""
        if not self.changes and not self.meta:
            self.since = now
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
