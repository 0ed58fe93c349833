"""The courier's token bucket and the wake line: pure logic."""

from hypothesis import given
from hypothesis import strategies as st

from bench_wire.untrusted import strip
from benchd.core.limits import TokenBucket
from benchd.core.wakegate import digest_line, wake_line


def test_burst_then_one_per_refill():
    b = TokenBucket(6, 60.0, now=0.0)
    assert all(b.take(0.0) for _ in range(6))
    assert not b.take(0.0)
    assert b.next_token_at(0.0) == 60.0
    assert not b.take(59.9)
    assert b.take(60.0)
    assert not b.take(60.0)


def test_never_more_than_burst():
    b = TokenBucket(2, 1.0, now=0.0)
    assert b.take(1000.0) and b.take(1000.0) and not b.take(1000.0)


def test_give_back_is_capped():
    b = TokenBucket(1, 10.0, now=0.0)
    b.give_back(0.0)
    assert b.take(0.0) and not b.take(0.0)


@given(st.lists(st.floats(min_value=0, max_value=10_000), max_size=200))
def test_wakes_never_exceed_burst_plus_refills(times):
    b = TokenBucket(6, 60.0, now=0.0)
    times = sorted(times)
    taken = sum(b.take(t) for t in times)
    horizon = times[-1] if times else 0.0
    assert taken <= 6 + horizon / 60.0


@given(st.text(), st.text())
def test_wake_line_has_no_control_characters(sender, path):
    line = wake_line(sender, path)
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) <= 0x9F for c in line)
    assert line.startswith("You have mail from ")


def test_clean_and_digest():
    assert strip("a\x1b[2Jb\r\nc\u202e\ue01f") == "a[2Jbc"
    assert digest_line(1) == "You have 1 unread message: run bench mail list to see them"
    assert digest_line(3).startswith("You have 3 unread messages")
