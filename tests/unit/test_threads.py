"""benchd.store.queries over a real SQLite file: a thread by its stored root, whole when
short, cut to the asked message's neighbourhood when long; the work is bounded by the
cap, not by the thread's depth (counted in SQL statements, not in time)."""

import sqlite3

import pytest

from benchd.store import queries, search


def mid(n: int) -> str:
    return f"20261130T045611.123Z-{n:04d}"


@pytest.fixture
def db(tmp_path):
    conn = sqlite3.connect(str(tmp_path / "links.sqlite"), isolation_level=None)
    search.create(conn)
    yield conn
    conn.close()


def chain(db, n: int, start: int = 0) -> list[str]:
    ids = [mid(start + k) for k in range(n)]
    db.execute("BEGIN")  # one commit for all, as the index writes a batch
    for k, mail_id in enumerate(ids):
        search.add(db, "bob", mail_id, "al", "s", "b", ids[k - 1] if k else None)
    db.execute("COMMIT")
    return ids


def statements(db, fn):
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    try:
        result = fn()
    finally:
        db.set_trace_callback(None)
    return result, len(seen)


def test_a_short_thread_is_whole_with_every_branch(db):
    ids = chain(db, 3)
    search.add(db, "al", mid(50), "bob", "s", "b", ids[0])  # a second branch off the root
    part = queries.thread(db, ids[2], cap=10)
    assert [x.mail_id for x in part.links] == [*ids, mid(50)]
    assert not part.cut


@pytest.mark.parametrize("asked", [0, 500, 999])
def test_a_long_thread_is_cut_around_the_message_asked(db, asked):
    ids = chain(db, 1000)
    part = queries.thread(db, ids[asked], cap=41)
    got = [ids.index(x.mail_id) for x in part.links]
    assert asked in got and 0 in got and len(got) == 41 and part.cut
    # Nearest first: a contiguous run around the message (and the root).
    near = [k for k in got if k != 0 or asked == 0]
    assert near == list(range(min(near), max(near) + 1))
    above = [k for k in got if k < asked]
    assert part.ancestors_left == asked - len(above)
    assert part.replies_left == (max(got) < 999)
    if part.ancestors_left:
        assert part.above == ids[min(k for k in above if k != 0)]
    if part.replies_left:
        assert part.below == ids[max(got)]


def test_the_work_is_bounded_by_the_cap_not_the_depth(db):
    shallow = chain(db, 300)
    deep = chain(db, 6000, start=1000)
    (short, n_short) = statements(db, lambda: queries.thread(db, shallow[-1], cap=50))
    (long_, n_long) = statements(db, lambda: queries.thread(db, deep[-1], cap=50))
    assert deep[-1] in [x.mail_id for x in long_.links]
    assert long_.ancestors_left == 5999 - 49
    assert n_long == n_short <= 2 * 50 + 10


def test_a_reply_indexed_before_its_parent_joins_the_thread(db):
    # reconcile meets files in any order; mail from another node may come first
    search.add(db, "bob", mid(3), "al", "s", "b", mid(2))
    search.add(db, "bob", mid(4), "al", "s", "b", mid(3))
    search.add(db, "bob", mid(1), "al", "s", "b", None)
    search.add(db, "bob", mid(2), "al", "s", "b", mid(1))
    part = queries.thread(db, mid(4), cap=10)
    assert [x.mail_id for x in part.links] == [mid(1), mid(2), mid(3), mid(4)]
    assert db.execute("SELECT depth FROM mail_links WHERE id=?", (mid(4),)).fetchone() == (3,)


def test_replies_indexed_before_their_parent_join_its_thread(db):
    # Reconcile meets files in any order, and mail from another node may come first: a
    # reply indexed before its parent is the root of its own thread until the parent
    # comes, then it and everything below it move under the parent.
    search.add(db, "bob", mid(2), "al", "s", "b", mid(1))  # a reply; its parent unknown
    search.add(db, "bob", mid(3), "al", "s", "b", mid(2))  # and a reply to it
    search.add(db, "bob", mid(9), "al", "s", "b", None)  # an unrelated message
    links = dict(db.execute("SELECT id, root || ':' || depth FROM mail_links"))
    assert links[mid(2)] == f"{mid(2)}:0" and links[mid(3)] == f"{mid(2)}:1"
    search.add(db, "bob", mid(1), "al", "s", "b", None)  # the parent, last
    links = dict(db.execute("SELECT id, root || ':' || depth FROM mail_links"))
    assert links == {
        mid(1): f"{mid(1)}:0",
        mid(2): f"{mid(1)}:1",
        mid(3): f"{mid(1)}:2",
        mid(9): f"{mid(9)}:0",
    }
    part = queries.thread(db, mid(3), cap=10)
    assert [x.mail_id for x in part.links] == [mid(1), mid(2), mid(3)]
