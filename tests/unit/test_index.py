"""benchd.store.index: the SQLite mail index on a temporary file."""

import os
import sqlite3

import pytest

from bench_wire import messages as m
from benchd.store.index import (
    READ,
    RETRY_FIRST_S,
    RETRY_MAX_S,
    UNREAD,
    Index,
    KeyHit,
    MailRow,
)
from tests.support.clock import TestClock, still


@pytest.fixture(params=["committed", "pending"])
def idx(request, tmp_path):
    """Each test twice: changes committed to SQLite after each step, and changes left in
    the pending layer (reads must merge it over the database to the same answers)."""
    i = Index(str(tmp_path / "index.sqlite"), now=still)
    i.commit_each = request.param == "committed"
    yield i
    i.close()


def settle(idx: Index) -> None:
    if getattr(idx, "commit_each", True):
        assert idx.flush()


def mid(n: int) -> str:
    return f"20261130T045611.123Z-{n:04d}"


def fill(idx: Index, handle: str, n: int, start: int = 1) -> list[str]:
    ids = []
    for k in range(start, start + n):
        idx.add(
            handle,
            mid(k),
            UNREAD,
            "operator",
            f"s{k}",
            "2026-11-30T04:56:11.123Z",
            k,
            f"key-{handle}-{k}",
        )
        ids.append(mid(k))
    settle(idx)
    return ids


def test_fresh_then_reopened(tmp_path):
    p = str(tmp_path / "i.sqlite")
    a = Index(p, now=still)
    assert a.fresh
    assert a.get_meta("schema") == "1"
    a.set_meta("last_seq", "7")
    fill(a, "bob", 2)
    a.close()
    b = Index(p, now=still)
    assert not b.fresh
    assert b.get_meta("last_seq") == "7"
    assert b.count("bob", UNREAD) == 2
    b.close()


def test_add_get_count(idx):
    fill(idx, "bob", 3)
    assert idx.count("bob", UNREAD) == 3
    assert idx.count("bob", READ) == 0
    assert idx.count("bob", None) == 3
    assert idx.count("nobody", None) == 0
    row = idx.get("bob", mid(2))
    assert row == MailRow(
        mid(2), "operator", "s2", "2026-11-30T04:56:11.123Z", UNREAD, 2, "key-bob-2"
    )
    assert idx.get("bob", mid(99)) is None
    assert idx.get("alice", mid(2)) is None


def test_add_twice_is_ignored_and_not_counted_twice(idx):
    fill(idx, "bob", 2)
    fill(idx, "bob", 2)
    assert idx.count("bob", UNREAD) == 2
    assert len(idx.page("bob", None, None, 10)) == 2


def test_page_in_send_order_with_cursor(idx):
    # Added out of order: listing order is id order, i.e. send order.
    for k in (5, 1, 4, 2, 3):
        idx.add("bob", mid(k), UNREAD, "x", "", "d", 0, f"k{k}")
    settle(idx)
    rows = idx.page("bob", UNREAD, None, 2)
    assert [r.mail_id for r in rows] == [mid(1), mid(2), mid(3)]  # limit + 1 to say "more"
    rows = idx.page("bob", UNREAD, mid(2), 2)
    assert [r.mail_id for r in rows] == [mid(3), mid(4), mid(5)]
    rows = idx.page("bob", UNREAD, mid(4), 2)
    assert [r.mail_id for r in rows] == [mid(5)]
    assert idx.page("bob", UNREAD, mid(5), 2) == []


def test_full_walk_with_pages(idx):
    ids = fill(idx, "bob", 137)
    seen = []
    cursor = None
    while True:
        rows = idx.page("bob", None, cursor, 50)
        seen += [r.mail_id for r in rows[:50]]
        if len(rows) <= 50:
            break
        cursor = rows[49].mail_id
    assert seen == ids


def test_mailboxes_are_separate(idx):
    fill(idx, "bob", 3)
    fill(idx, "carol", 2, start=10)
    assert idx.count("bob", None) == 3 and idx.count("carol", None) == 2
    assert [r.mail_id for r in idx.page("carol", None, None, 10)] == [mid(10), mid(11)]
    assert len(idx.handles()) == 2
    assert sorted(idx.handles()) == ["bob", "carol"]
    assert idx.newest_id() == mid(11)


def test_set_state_moves_counts(idx):
    fill(idx, "bob", 3)
    assert idx.set_state("bob", mid(2), READ) is True
    assert idx.set_state("bob", mid(2), READ) is False  # already read
    assert idx.set_state("bob", mid(42), READ) is False  # unknown
    settle(idx)
    assert idx.count("bob", UNREAD) == 2
    assert idx.count("bob", READ) == 1
    assert idx.count("bob", None) == 3
    assert [r.mail_id for r in idx.page("bob", READ, None, 10)] == [mid(2)]
    assert [r.mail_id for r in idx.page("bob", UNREAD, None, 10)] == [mid(1), mid(3)]
    assert [(r.mail_id, r.state) for r in idx.page("bob", None, None, 10)] == [
        (mid(1), UNREAD),
        (mid(2), READ),
        (mid(3), UNREAD),
    ]
    assert idx.ids("bob") == {mid(1): UNREAD, mid(2): READ, mid(3): UNREAD}


def test_the_oldest_unread_comes_first(idx):
    assert idx.unread_after("bob", None, 1) == []
    fill(idx, "bob", 3)
    assert idx.unread_after("bob", None, 1) == [mid(1)]
    idx.set_state("bob", mid(1), READ)
    assert idx.unread_after("bob", None, 1) == [mid(2)]
    idx.set_state("bob", mid(2), READ)
    idx.set_state("bob", mid(3), READ)
    assert idx.unread_after("bob", None, 1) == []


def test_remove(idx):
    fill(idx, "bob", 3)
    idx.set_state("bob", mid(3), READ)
    idx.remove("bob", mid(3))
    idx.remove("bob", mid(1))
    idx.remove("bob", mid(99))
    assert idx.count("bob", UNREAD) == 1 and idx.count("bob", READ) == 0
    assert [r.mail_id for r in idx.page("bob", None, None, 10)] == [mid(2)]
    assert idx.ids("bob") == {mid(2): UNREAD}


def test_find_key(idx):
    fill(idx, "bob", 2)
    assert idx.find_key("operator", "key-bob-2") == KeyHit("bob", mid(2), UNREAD)
    assert idx.find_key("alice", "key-bob-2") is None  # keys are per sender
    assert idx.find_key("operator", "nope") is None


def test_reader_sees_writer_commits(idx):
    fill(idx, "bob", 1)
    assert idx.count("bob", UNREAD) == 1  # the reader connection
    fill(idx, "bob", 1, start=2)
    assert idx.count("bob", UNREAD) == 2
    assert idx.unread_after("bob", None, 1) == [mid(1)]


def test_a_damaged_index_is_set_aside_and_rebuilt(tmp_path):
    # The module promises: "A damaged or foreign index is set aside (never trusted)".
    p = str(tmp_path / "index.sqlite")
    with open(p, "wb") as f:
        f.write(b"this is not a database, it is garbage " * 200)
    i = Index(p, now=still)
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
    i = Index(p, now=still)
    try:
        assert i.fresh
        assert i.get_meta("schema") == "1"
        assert os.path.exists(p + ".damaged")
    finally:
        i.close()


# ---------------------------------------------------------------- failures (real SQLite)


def locker(path: str) -> sqlite3.Connection:
    """A second connection, as another process would hold it: a write lock taken."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    return db


def test_a_lock_held_elsewhere_keeps_changes_pending_and_readable(tmp_path):
    p = str(tmp_path / "index.sqlite")
    notes = []
    i = Index(p, lambda kind, **f: notes.append((kind, f)), now=still)
    fill(i, "bob", 2)
    assert i.flush()
    other = locker(p)
    try:
        i.add("bob", mid(3), UNREAD, "operator", "s3", "d", 3, "key-bob-3")
        i.set_state("bob", mid(1), READ)
        assert i.flush() is False  # busy: fails at once (busy_timeout=0), nothing waits
        assert i.health().state == "retrying" and i.health().pending == 2
        assert notes and notes[0][0] == "index/failed" and notes[0][1]["action"] == "retry"
        # Everything answered is still listed, readable and deduplicated.
        assert i.find_key("operator", "key-bob-3") == KeyHit("bob", mid(3), UNREAD)
        assert i.count("bob", UNREAD) == 2 and i.count("bob", READ) == 1
        assert i.unread_after("bob", None, 1) == [mid(2)]
        assert i.retry_at > 0
    finally:
        other.execute("ROLLBACK")
        other.close()
    i.retry_at = 0
    assert i.flush()
    assert i.health() == m.IndexHealth()
    i.close()
    j = Index(p, now=still)
    assert j.count("bob", UNREAD) == 2 and j.get("bob", mid(3)) is not None
    j.close()


def test_commit_timing_follows_the_injected_clock(tmp_path):
    """When a flush is due (the changes' age, the retry backoff) is read from the
    index's clock: a test moves time, nothing sleeps."""
    clock = TestClock(now=100.0)
    p = str(tmp_path / "index.sqlite")
    i = Index(p, now=clock.now)
    assert not i.due(0)  # nothing pending
    i.add("bob", mid(1), UNREAD, "operator", "s1", "d", 1, "k1")
    assert i.pending.since == 100.0
    assert not i.due(1.0) and i.flush_in(1.0) == 1.0
    clock.advance(0.4)
    i.set_state("bob", mid(1), READ)  # a later change does not re-date the batch
    assert i.pending.since == 100.0 and i.flush_in(1.0) == pytest.approx(0.6)
    clock.advance(0.6)
    assert i.due(1.0) and i.flush_in(1.0) == 0.0
    assert i.flush()
    # A failed flush backs off on the same clock: not due again until the delay passed.
    other = locker(p)
    try:
        i.add("bob", mid(2), UNREAD, "operator", "s2", "d", 2, "k2")
        assert i.flush() is False
        assert i.retry_at == pytest.approx(clock.now() + RETRY_FIRST_S)
        assert not i.due(0) and i.flush_in(0) == pytest.approx(RETRY_FIRST_S)
        clock.advance(RETRY_FIRST_S)
        assert i.due(0)
        assert i.flush() is False  # the second failure doubles the delay
        assert i.flush_in(0) == pytest.approx(min(RETRY_MAX_S, 2 * RETRY_FIRST_S))
    finally:
        other.execute("ROLLBACK")
        other.close()
    clock.advance(RETRY_MAX_S)
    assert i.due(0) and i.flush()
    assert i.retry_at == 0.0 and not i.due(0)
    i.close()


def test_set_meta_dates_the_pending_changes_by_the_clock(tmp_path):
    clock = TestClock(now=5.0)
    i = Index(str(tmp_path / "index.sqlite"), now=clock.now)
    i.set_meta("x", "1")
    clock.advance(2.0)
    i.set_meta("y", "2")  # not the oldest change
    assert i.pending.since == 5.0 and i.due(2.0) and not i.due(2.5)
    i.close()


def test_a_failure_that_persists_asks_for_a_rebuild(tmp_path):
    p = str(tmp_path / "index.sqlite")
    i = Index(p, now=still)
    other = locker(p)
    try:
        i.add("bob", mid(1), UNREAD, "operator", "", "d", 0, "k")
        for _ in range(20):
            i.flush()
            if i.needs_rebuild:
                break
        assert i.needs_rebuild
    finally:
        other.execute("ROLLBACK")
        other.close()
        i.close()


def test_recover_now_sets_the_file_aside_and_refills_it(tmp_path):
    p = str(tmp_path / "index.sqlite")
    notes = []
    i = Index(p, lambda kind, **f: notes.append(kind), now=still)
    fill(i, "bob", 3)
    assert i.flush()
    i.rebuild = lambda idx: fill(idx, "bob", 2)  # what the files hold now
    i.recover_now("test")
    assert os.path.exists(p + ".damaged")
    assert i.count("bob", None) == 2 and i.rebuilds == 1
    assert "index/failed" in notes
    assert not i.pending  # the refill is committed
    i.close()


def test_corruption_found_by_a_read_rebuilds_instead_of_failing(tmp_path):
    p = str(tmp_path / "index.sqlite")
    i = Index(p, now=still)
    fill(i, "bob", 400)
    assert i.flush()
    i.close()
    j = Index(p, now=still)
    j.commit_each = True
    assert not j.fresh
    j.rebuild = lambda idx: fill(idx, "bob", 1)
    size = os.path.getsize(p)
    with open(p, "r+b") as f:  # damaged under the open index: every page but the first
        for off in range(4096, size, 4096):
            f.seek(off)  # the page header and cell pointers
            f.write(b"\xa5" * 200)
    rows = j.page("bob", None, None, 10)  # would be "database disk image is malformed"
    assert [r.mail_id for r in rows] == [mid(1)]
    assert j.rebuilds == 1
    j.close()


def test_no_file_at_all_falls_back_to_memory(tmp_path):
    p = str(tmp_path / "index.sqlite")
    with open(p, "wb") as f:
        f.write(b"garbage" * 1000)
    # The damaged file cannot be moved aside (a directory is in the way, which stops
    # root too), so no new file can take its place.
    os.makedirs(p + ".damaged/x")
    notes = []
    i = Index(p, lambda kind, **f: notes.append(f), now=still)
    assert i.health().state == "in-memory"
    assert "in memory" in notes[-1]["error"]
    fill(i, "bob", 1)
    assert i.count("bob", UNREAD) == 1
    i.close()


def test_pending_changes_over_committed_rows_list_like_the_database(tmp_path):
    # Pages, counts and cursors agree whether a change is committed or still pending.
    a, b = (
        Index(str(tmp_path / "a.sqlite"), now=still),
        Index(str(tmp_path / "b.sqlite"), now=still),
    )
    for i in (a, b):
        fill(i, "bob", 30)
        i.commit_each = False
        for k in range(2, 30, 3):
            i.set_state("bob", mid(k), READ)
        for k in range(5, 30, 7):
            i.remove("bob", mid(k))
        fill(i, "bob", 5, start=40)
    assert b.flush()
    assert a.pending and not b.pending
    for st in (None, UNREAD, READ):
        assert a.count("bob", st) == b.count("bob", st)
        for cursor in (None, mid(3), mid(17), mid(41)):
            for limit in (1, 4, 50):
                assert a.page("bob", st, cursor, limit) == b.page("bob", st, cursor, limit)
    a.close()
    b.close()


def test_a_rebuilt_index_that_fails_again_moves_to_memory(tmp_path):
    # A disk that stays full: after one rebuild whose commits fail too, the index is
    # kept in memory rather than rebuilt from the files again and again.
    p = str(tmp_path / "index.sqlite")
    notes = []
    i = Index(p, lambda kind, **f: notes.append(f.get("action")), now=still)
    i.rebuild = lambda idx: idx.add("bob", mid(1), UNREAD, "operator", "", "d", 0, "k")
    i.recover_now("first")
    assert not i.in_memory and not i.pending  # the rebuilt file committed
    i.recover_now("second")  # a commit succeeded in between: a file again
    assert not i.in_memory
    other = locker(p)
    try:
        i.add("bob", mid(2), UNREAD, "operator", "", "d", 0, "k2")
        assert i.flush() is False
        i._rebuilt_unproven = True  # as if the rebuild had not committed either
        i.recover_now("third")
        assert i.in_memory and "in-memory" in notes
        assert i.health().state == "in-memory"
        assert i.get("bob", mid(1)) is not None
    finally:
        other.execute("ROLLBACK")
        other.close()
        i.close()


def test_pending_changes_are_typed_values_in_order(tmp_path):
    from benchd.store.index import Insert, MailRow, Remove, SetColumns, SetState

    i = Index(str(tmp_path / "index.sqlite"), now=still)
    fill(i, "bob", 1)  # flushed (a bare Index has no `commit_each`)
    i.add("bob", mid(2), UNREAD, "operator", "s", "d", 3, "k2")
    i.set_state("bob", mid(2), READ)
    i.put_state(mid(2), {"delivered": 1})
    i.remove("bob", mid(2))
    assert i.pending.changes == [
        Insert("bob", MailRow(mid(2), "operator", "s", "d", UNREAD, 3, "k2")),
        SetState("bob", mid(2), READ),
        SetColumns(mid(2), {"delivered": 1}),
        Remove("bob", mid(2)),
    ]
    with pytest.raises(AttributeError):
        i.pending.changes[0].handle = "eve"  # type: ignore[misc]  # frozen
    i.close()


def test_a_change_of_no_known_kind_fails_the_flush_loudly(tmp_path):
    i = Index(str(tmp_path / "index.sqlite"), now=still)
    i.pending.changes.append(("remove", ("bob", mid(1))))  # type: ignore[arg-type]  # the old form
    with pytest.raises(AssertionError):
        i.flush()
    i.close()
