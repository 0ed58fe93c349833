"""benchd.core.names: handles, message ids, and the time-sortable id clock."""

import calendar
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench_wire.errors import WireError
from benchd.core.names import (
    OPERATOR,
    IdClock,
    check_handle,
    check_mail_id,
    format_ms,
    is_handle,
)

HANDLE_RULE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}", re.ASCII)
ALLOWED = set("abcdefghijklmnopqrstuvwxyz0123456789._-")


def reference_is_handle(s: str) -> bool:
    """The contract in words, without a regex: 1-64 of [a-z0-9._-], first [a-z0-9]."""
    return (
        1 <= len(s) <= 64
        and all(c in ALLOWED for c in s)
        and s[0] in "abcdefghijklmnopqrstuvwxyz0123456789"
    )


# ---------------------------------------------------------------- handles


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "..",
        "/",
        "a/b",
        "../x",
        "a\x00b",
        "\x00",
        "Alice",
        "ALICE",
        "aB",
        "a b",
        " a",
        "a ",
        "a" * 65,
        "-a",
        ".a",
        "_a",
        "a\n",
        "\na",
        "é",
        "a\u0131",
        "a:b",
        "a\\b",
        "~a",
        "a" * 64 + "\n",
    ],
)
def test_bad_handles(bad):
    assert not is_handle(bad)
    with pytest.raises(WireError) as info:
        check_handle(bad)
    assert info.value.code == "bad-handle"
    assert repr(bad) in info.value.message


@pytest.mark.parametrize(
    "good", ["a", "0", "a" * 64, "alice", "a.b", "a..b", "a-", "a_", "9lives", "x.y_z-1", OPERATOR]
)
def test_good_handles(good):
    assert is_handle(good)
    assert check_handle(good) == good


@pytest.mark.parametrize("value", [None, 3, b"alice", ["alice"]])
def test_non_strings_are_not_handles(value):
    assert not is_handle(value)
    with pytest.raises(WireError):
        check_handle(value)


def test_check_handle_names_what_was_wrong():
    with pytest.raises(WireError) as info:
        check_handle("A", "recipient")
    assert "recipient" in info.value.message


@settings(max_examples=1000)
@given(
    st.text(max_size=70)
    | st.from_regex(r"[a-z0-9._-]{0,66}", fullmatch=True)
    | st.text(alphabet="ab.-_/A \x00", max_size=66)
)
def test_is_handle_agrees_with_the_spec(s):
    expected = HANDLE_RULE.fullmatch(s) is not None
    assert expected == reference_is_handle(s)
    assert is_handle(s) == expected


# ---------------------------------------------------------------- mail ids


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "x",
        "../x",
        "a/b",
        "../../etc/passwd",
        "20261130T045611.123Z-0001/../x",
        "20261130T045611.123Z-0001\n",
        "20261130T045611.123Z-0001.md",
        "/20261130T045611.123Z-0001",
        "20261130T045611.123Z-001",
        "20261130T045611.123-0001",
        "20261130t045611.123Z-0001",
        " 20261130T045611.123Z-0001",
        None,
        20261130,
    ],
)
def test_bad_mail_ids(bad):
    with pytest.raises(WireError) as info:
        check_mail_id(bad)
    assert info.value.code == "bad-id"


def test_mail_ids_are_ascii_digits_only():
    # \d in a str pattern matches any Unicode digit (Arabic-Indic, full-width, ...).
    for bad in [
        "\u0662\u0660\u0662\u0666\u0661\u0661\u0663\u0660T045611.123Z-0001",
        "20261130T045611.123Z-\uff10\uff10\uff10\uff11",
    ]:
        with pytest.raises(WireError) as info:
            check_mail_id(bad)
        assert info.value.code == "bad-id"


def test_good_mail_id():
    assert check_mail_id("20261130T045611.123Z-0001") == "20261130T045611.123Z-0001"


def test_format_ms():
    ms = calendar.timegm((2026, 11, 30, 4, 56, 11)) * 1000 + 123
    assert format_ms(ms) == "2026-11-30T04:56:11.123Z"
    assert format_ms(ms - 123) == "2026-11-30T04:56:11.000Z"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", format_ms(int(time.time() * 1000))
    )


# ---------------------------------------------------------------- IdClock

T0 = calendar.timegm((2026, 11, 30, 4, 56, 11)) * 1000 + 123


def test_id_shape_and_time():
    clock = IdClock()
    mail_id, ms = clock.next(T0)
    assert mail_id == "20261130T045611.123Z-0001"
    assert ms == T0
    check_mail_id(mail_id)


def test_ids_strictly_increase_within_one_ms():
    clock = IdClock()
    ids = [clock.next(T0)[0] for _ in range(5)]
    assert ids == [f"20261130T045611.123Z-000{i}" for i in range(1, 6)]


def test_clock_stepping_back_never_goes_back():
    clock = IdClock()
    ids = [clock.next(t)[0] for t in (T0, T0 + 5, T0 - 1000, T0 - 60_000, T0 + 5, T0 + 6)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for i in ids:
        check_mail_id(i)


def test_more_than_9999_in_one_ms_borrows_the_next_ms():
    clock = IdClock()
    ids = [clock.next(T0) for _ in range(10_005)]
    names = [i for i, _ in ids]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert names[9998] == "20261130T045611.123Z-9999"
    assert names[9999] == "20261130T045611.124Z-0001"
    assert ids[9999][1] == T0 + 1
    # The real clock then reaches that ms: still strictly increasing.
    nxt = clock.next(T0 + 1)[0]
    assert nxt > names[-1]
    for n in names[::997]:
        check_mail_id(n)


def test_seeded_from_last_id():
    last = "20261130T045611.123Z-0005"
    clock = IdClock(last)
    a = clock.next(T0)[0]
    assert a == "20261130T045611.123Z-0006"
    clock = IdClock(last)
    assert clock.next(T0 - 3_600_000)[0] > last  # a clock far behind the last id
    clock = IdClock(last)
    b, ms = clock.next(T0 + 1)
    assert b == "20261130T045611.124Z-0001" and ms == T0 + 1
    clock = IdClock("20261130T045611.123Z-9999")
    assert clock.next(T0)[0] == "20261130T045611.124Z-0001"


@settings(max_examples=200)
@given(st.lists(st.integers(min_value=-5_000, max_value=5_000), min_size=1, max_size=200))
def test_ids_sort_in_generation_order_whatever_the_clock_does(steps):
    clock = IdClock()
    t = T0
    ids = []
    for d in steps:
        t += d
        ids.append(clock.next(t)[0])
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    # And a clock reseeded from the newest id continues above it.
    again = IdClock(ids[-1]).next(T0 - 10_000)[0]
    assert again > ids[-1]


def test_split_address_splits_and_validates():
    from benchd.core.names import split_address

    assert split_address("bob") == ("bob", None)
    assert split_address("bob@node2") == ("bob", "node2")
    for bad, code in (("Bob", "bad-handle"), ("bob@", "bad-node"), ("bob@No de", "bad-node")):
        with pytest.raises(WireError) as err:
            split_address(bad)
        assert err.value.code == code


def test_resolve_says_where_an_address_leads_from_this_node():
    from bench_wire.addresses import resolve

    known = {"node2"}.__contains__
    assert resolve("bob", "node1", known) == ("bob", None)
    assert resolve("bob@node1", "node1", known) == ("bob", None)  # this node: a mailbox here
    assert resolve("bob@node2", "node1", known) == ("bob", "node2")
    assert resolve("bob@node9", "node1") == ("bob", "node9")  # no directory: not checked
    with pytest.raises(WireError) as err:
        resolve("bob@node9", "node1", known, "reply-to")
    assert err.value.code == "unknown-node"
    assert err.value.message == (
        "no node named node9 has been seen (bench nodes lists the known ones); "
        "start its bridge, or check the name"
    )
    # Checked as split_address checks it, naming what it is.
    for bad, code in (("Bob", "bad-handle"), ("bob@", "bad-node"), ("Bob@node1", "bad-handle")):
        with pytest.raises(WireError) as err:
            resolve(bad, "node1", known, "reply-to")
        assert err.value.code == code and "reply-to" in err.value.message
