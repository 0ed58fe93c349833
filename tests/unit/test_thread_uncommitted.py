"""A thread while the index cannot commit (a full disk, a lock held elsewhere): the
messages in its pending layer are found by `locate` and `thread` as committed ones are.

A trial on a full disk after a kill -9 found `mail thread` answering no-such-message for
a message `mail read` had just returned: the search tables hold only committed mail.
"""

import sqlite3

from benchd.core.frontmatter import FrontMatter
from benchd.store.index import UNREAD, Index
from benchd.store.queries import MailQueries
from tests.support.clock import still


def mid(n: int) -> str:
    return f"20261130T045611.123Z-{n:04d}"


def send(i: Index, n: int, to: str, sender: str, parent: int | None = None) -> str:
    meta = FrontMatter(
        id=mid(n),
        sender=sender,
        to=to,
        subject=f"s{n}",
        date="2026-11-30T04:56:11.123Z",
        key=f"k{n}",
        in_reply_to=None if parent is None else mid(parent),
    )
    i.add(to, mid(n), UNREAD, sender, meta.subject, meta.date, 4, meta.key)
    i.add_text(to, mid(n), meta, "body")
    return mid(n)


def test_a_thread_with_uncommitted_messages_is_found_whole(tmp_path):
    p = str(tmp_path / "index.sqlite")
    i = Index(p, now=still)
    q = MailQueries(i)
    send(i, 1, "bob", "alice")  # committed: the thread's root
    send(i, 2, "alice", "bob", parent=1)
    assert i.flush()
    other = sqlite3.connect(p, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another process would: commits now fail
    try:
        send(i, 3, "bob", "alice", parent=2)  # uncommitted reply to a committed one
        send(i, 4, "alice", "bob", parent=3)  # and a reply to that
        send(i, 5, "carol", "operator")  # another thread, uncommitted
        assert i.flush() is False and i.pending.changes
        assert [(x.handle, x.sender) for x in q.locate(mid(3))] == [("bob", "alice")]
        for asked in (1, 2, 3, 4):
            got = [x.mail_id for x in q.thread(mid(asked), 200).links]
            assert got == [mid(1), mid(2), mid(3), mid(4)], asked
        assert [x.mail_id for x in q.thread(mid(5), 200).links] == [mid(5)]
        # Bounded: a cap of 2 answers two messages, the one asked among them, cut.
        part = q.thread(mid(4), 2)
        assert mid(4) in [x.mail_id for x in part.links] and len(part.links) == 2 and part.cut
    finally:
        other.execute("ROLLBACK")
        other.close()
    i.retry_at = 0
    assert i.flush()
    assert [x.mail_id for x in q.thread(mid(3), 200).links] == [mid(1), mid(2), mid(3), mid(4)]
    i.close()
