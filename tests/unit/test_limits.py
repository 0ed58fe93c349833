"""benchd.core.limits: the sender limits' decisions, fed counts and times (no clock),
and the index's unread tally they read (benchd.store.index.Index.unread)."""

import pytest

from benchd.core.limits import Floods, Limits, SendLimits
from benchd.store.index import READ, UNREAD, Index
from tests.support.clock import still

LIMITS = Limits(
    send_burst=3,
    send_rate=2.0,
    operator_send_burst=10,
    operator_send_rate=5.0,
    mailbox_messages=4,
    mailbox_bytes=100,
    reply_to_max=2,
)


def test_a_sender_spends_its_burst_then_waits_for_the_rate():
    s = SendLimits(LIMITS)
    assert [s.take("al", False, 1, 0.0) for _ in range(3)] == [None, None, None]
    r = s.take("al", False, 1, 0.0)
    assert r is not None and r.code == "rate-limited"
    assert r.retry_after == 0.5  # 2 a second: the next one in half a second
    assert "try again in 0.5 s" in r.message
    assert s.take("al", False, 1, 0.25) is not None  # still too early
    assert s.take("al", False, 1, 0.5) is None


def test_each_sender_has_its_own_bucket_and_the_operator_a_larger_one():
    s = SendLimits(LIMITS)
    for _ in range(3):
        assert s.take("al", False, 1, 0.0) is None
    assert s.take("al", False, 1, 0.0) is not None
    assert s.take("bo", False, 1, 0.0) is None
    assert [s.take("operator", True, 1, 0.0) for _ in range(10)] == [None] * 10
    r = s.take("operator", True, 1, 0.0)
    assert r is not None and r.limit == 10 and r.retry_after == 0.2


def test_several_sends_at_once_are_taken_whole_or_not_at_all():
    s = SendLimits(LIMITS)
    assert s.take("al", False, 2, 0.0) is None
    r = s.take("al", False, 2, 0.0)
    assert r is not None and r.retry_after == 0.5  # one is there, one more to come
    assert s.take("al", False, 1, 0.0) is None  # the refusal spent nothing
    too_many = s.take("al", False, 4, 100.0)
    assert too_many is not None and too_many.retry_after is None  # never fits


def test_one_line_per_flood_and_source_with_its_count():
    s = SendLimits(LIMITS)
    for _ in range(3):
        s.take("al", False, 1, 0.0)
    first, second = s.take("al", False, 1, 0.0), s.take("al", False, 1, 0.0)
    assert first is not None and first.announce and first.count == 1
    assert second is not None and not second.announce and second.count == 0
    # A send that gets through does not start a new line: alternating a send and a
    # refusal is a flood too (one line per --flood-interval, 60 s here).
    assert s.take("al", False, 1, 10.0) is None
    for _ in range(2):
        s.take("al", False, 1, 10.0)
    quiet = s.take("al", False, 1, 10.0)
    assert quiet is not None and not quiet.announce
    # Another source is its own flood.
    other = s.recipients("bo", 3, 10.0)
    assert other is not None and other.count == 1
    # A minute after the first line, the next refusal is written down with the count of
    # those it stands for: the two quiet ones and itself.
    for _ in range(3):
        s.take("al", False, 1, 61.0)
    again = s.take("al", False, 1, 61.0)
    assert again is not None and again.announce and again.count == 3


def test_floods_forget_the_oldest_source_past_their_cap():
    f = Floods(every=60.0, sources=2)
    assert [f.count(k, 0.0) for k in ("a", "b", "a", "b")] == [1, 1, 0, 0]
    assert f.count("c", 1.0) == 1  # "a" (logged longest ago) is forgotten
    assert f.count("a", 2.0) == 1  # so its next refusal is written down at once
    assert len(f.seen) == 2


@pytest.mark.parametrize(
    ("unread", "unread_bytes", "size", "refused"),
    [(3, 0, 1, False), (4, 0, 1, True), (0, 60, 40, False), (0, 60, 41, True)],
)
def test_a_mailbox_takes_mail_up_to_its_unread_limits(unread, unread_bytes, size, refused):
    r = SendLimits(LIMITS).mailbox("bob", unread, unread_bytes, size, 0.0)
    assert (r is not None) == refused
    if r is not None:
        assert r.code == "mailbox-full" and "bob" in r.message


def test_reply_to_addresses_up_to_the_limit():
    s = SendLimits(LIMITS)
    assert s.recipients("al", 2, 0.0) is None
    r = s.recipients("al", 3, 0.0)
    assert r is not None and r.code == "too-many-recipients" and r.limit == 2


def test_the_unread_tally_follows_every_change_and_survives_a_flush(tmp_path):
    idx = Index(str(tmp_path / "index.sqlite"), now=still)
    date = "2026-11-30T04:56:11.123Z"
    for k in range(1, 4):
        idx.add("bob", f"20261130T045611.123Z-000{k}", UNREAD, "al", "s", date, 10 * k, f"k{k}")
    assert idx.flush()
    assert idx.unread("bob") == (3, 60)  # counted from the database
    idx.add("bob", "20261130T045611.123Z-0004", UNREAD, "al", "s", date, 5, "k4", new=True)
    assert idx.unread("bob") == (4, 65)
    idx.set_state("bob", "20261130T045611.123Z-0001", READ)
    assert idx.unread("bob") == (3, 55)
    idx.remove("bob", "20261130T045611.123Z-0002")
    assert idx.unread("bob") == (2, 35)
    assert idx.flush()
    fresh = Index(str(tmp_path / "index.sqlite"), now=still)
    assert fresh.unread("bob") == idx.unread("bob") == (2, 35)
    assert fresh.unread("nobody") == (0, 0)
    assert "nobody" not in fresh._unread  # names without mail are not remembered
    idx.close()
    fresh.close()
