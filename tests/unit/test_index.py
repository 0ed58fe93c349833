"""benchd.index: the SQLite mail index on a temporary file."""

import os
import sqlite3

import pytest

from benchd.index import READ, UNREAD, Index


@pytest.fixture
def idx(tmp_path):
    i = Index(str(tmp_path / "index.sqlite"))
    yield i
    i.close()


def mid(n: int) -> str:
    return f"20261130T045611.123Z-{n:04d}"


def fill(idx: Index, handle: str, n: int, start: int = 1) -> list[str]:
    idx.begin()
    ids = []
    for k in range(start, start + n):
        idx.add(handle, mid(k), UNREAD, "operator", f"s{k}", "2026-11-30T04:56:11.123Z", k,
                f"key-{handle}-{k}")
        ids.append(mid(k))
    idx.commit()
    return ids


def test_fresh_then_reopened(tmp_path):
    p = str(tmp_path / "i.sqlite")
    a = Index(p)
    assert a.fresh
    assert a.get_meta("schema") == "1"
    a.set_meta("clean", "1")
    fill(a, "bob", 2)
    a.close()
    b = Index(p)
    assert not b.fresh
    assert b.get_meta("clean") == "1"
    assert b.count("bob", UNREAD) == 2
    b.close()


def test_add_get_count(idx):
    fill(idx, "bob", 3)
    assert idx.count("bob", UNREAD) == 3
    assert idx.count("bob", READ) == 0
    assert idx.count("bob", None) == 3
    assert idx.count("nobody", None) == 0
    row = idx.get("bob", mid(2))
    assert row == (mid(2), "operator", "s2", "2026-11-30T04:56:11.123Z", UNREAD, 2, "key-bob-2")
    assert idx.get("bob", mid(99)) is None
    assert idx.get("alice", mid(2)) is None


def test_add_twice_is_ignored_and_not_counted_twice(idx):
    fill(idx, "bob", 2)
    fill(idx, "bob", 2)
    assert idx.count("bob", UNREAD) == 2
    assert len(idx.page("bob", None, None, 10)) == 2


def test_page_in_send_order_with_cursor(idx):
    # Added out of order: listing order is id order, i.e. send order.
    idx.begin()
    for k in (5, 1, 4, 2, 3):
        idx.add("bob", mid(k), UNREAD, "x", "", "d", 0, f"k{k}")
    idx.commit()
    rows = idx.page("bob", UNREAD, None, 2)
    assert [r[0] for r in rows] == [mid(1), mid(2), mid(3)]  # limit + 1 to say "more"
    rows = idx.page("bob", UNREAD, mid(2), 2)
    assert [r[0] for r in rows] == [mid(3), mid(4), mid(5)]
    rows = idx.page("bob", UNREAD, mid(4), 2)
    assert [r[0] for r in rows] == [mid(5)]
    assert idx.page("bob", UNREAD, mid(5), 2) == []


def test_full_walk_with_pages(idx):
    ids = fill(idx, "bob", 137)
    seen = []
    cursor = None
    while True:
        rows = idx.page("bob", None, cursor, 50)
        seen += [r[0] for r in rows[:50]]
        if len(rows) <= 50:
            break
        cursor = rows[49][0]
    assert seen == ids


def test_mailboxes_are_separate(idx):
    fill(idx, "bob", 3)
    fill(idx, "carol", 2, start=10)
    assert idx.count("bob", None) == 3 and idx.count("carol", None) == 2
    assert [r[0] for r in idx.page("carol", None, None, 10)] == [mid(10), mid(11)]
    assert idx.mailbox_count() == 2
    assert sorted(idx.handles_w()) == ["bob", "carol"]
    assert idx.newest_id_w() == mid(11)


def test_set_state_moves_counts(idx):
    fill(idx, "bob", 3)
    idx.begin()
    assert idx.set_state("bob", mid(2), READ) is True
    assert idx.set_state("bob", mid(2), READ) is False  # already read
    assert idx.set_state("bob", mid(42), READ) is False  # unknown
    idx.commit()
    assert idx.count("bob", UNREAD) == 2
    assert idx.count("bob", READ) == 1
    assert idx.count("bob", None) == 3
    assert [r[0] for r in idx.page("bob", READ, None, 10)] == [mid(2)]
    assert [r[0] for r in idx.page("bob", UNREAD, None, 10)] == [mid(1), mid(3)]
    assert [(r[0], r[4]) for r in idx.page("bob", None, None, 10)] == [
        (mid(1), UNREAD), (mid(2), READ), (mid(3), UNREAD)]
    assert idx.ids_w("bob") == {mid(1): UNREAD, mid(2): READ, mid(3): UNREAD}


def test_oldest_unread(idx):
    assert idx.oldest_unread("bob") is None
    fill(idx, "bob", 3)
    assert idx.oldest_unread("bob") == mid(1)
    idx.set_state("bob", mid(1), READ)
    assert idx.oldest_unread("bob") == mid(2)
    idx.set_state("bob", mid(2), READ)
    idx.set_state("bob", mid(3), READ)
    assert idx.oldest_unread("bob") is None


def test_remove(idx):
    fill(idx, "bob", 3)
    idx.set_state("bob", mid(3), READ)
    idx.remove("bob", mid(3))
    idx.remove("bob", mid(1))
    idx.remove("bob", mid(99))
    assert idx.count("bob", UNREAD) == 1 and idx.count("bob", READ) == 0
    assert idx.ids_w("bob") == {mid(2): UNREAD}


def test_find_key(idx):
    fill(idx, "bob", 2)
    assert idx.find_key("operator", "key-bob-2") == ("bob", mid(2), UNREAD)
    assert idx.find_key("alice", "key-bob-2") is None  # keys are per sender
    assert idx.find_key("operator", "nope") is None


def test_rollback_discards_the_batch(idx):
    fill(idx, "bob", 1)
    idx.begin()
    idx.add("bob", mid(2), UNREAD, "x", "", "d", 0, "k")
    idx.rollback()
    assert idx.count("bob", None) == 1
    assert idx.get("bob", mid(2)) is None
    idx.rollback()  # nothing open: harmless


def test_reader_sees_writer_commits(idx):
    fill(idx, "bob", 1)
    assert idx.count("bob", UNREAD) == 1  # the reader connection
    fill(idx, "bob", 1, start=2)
    assert idx.count("bob", UNREAD) == 2
    assert idx.oldest_unread("bob") == mid(1)


def test_a_damaged_index_is_set_aside_and_rebuilt(tmp_path):
    # The module promises: "A damaged or foreign index is set aside (never trusted)".
    p = str(tmp_path / "index.sqlite")
    with open(p, "wb") as f:
        f.write(b"this is not a database, it is garbage " * 200)
    i = Index(p)
    try:
        assert i.fresh
        assert os.path.exists(p + ".damaged")
        fill(i, "bob", 1)
        assert i.count("bob", UNREAD) == 1
    finally:
        i.close()


def test_a_foreign_schema_version_is_set_aside(tmp_path):
    p = str(tmp_path / "index.sqlite")
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', '999')")
    db.commit()
    db.close()
    i = Index(p)
    try:
        assert i.fresh
        assert i.get_meta("schema") == "1"
        assert os.path.exists(p + ".damaged")
    finally:
        i.close()
