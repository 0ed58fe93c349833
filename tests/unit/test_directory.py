"""The node directory read as untrusted input, and bounce texts (pure)."""

import json

import pytest

from bench_bridge import admission as d
from bench_wire.errors import WireError
from benchd.runtime import outbound

NOW = 1_800_000_000_000
L = d.Limits(entry_max=1024, handles_max=3, nodes_max=2, forget_s=60.0)


def entry(**kw) -> bytes:
    base = {"node": "n2", "seen_ms": NOW - 1000, "handles": ["bob"], "instance": "i2"}
    base.update(kw)
    return json.dumps(base).encode()


def test_a_good_entry_is_read():
    e = d.decode_entry("n2", entry(), NOW, L)
    assert (e.node, e.seen_ms, e.handles, e.instance) == ("n2", NOW - 1000, ["bob"], "i2")


@pytest.mark.parametrize(
    "key,raw,code",
    [
        ("n2", b'{"node":"n2","seen_ms":1,"handles":[1,2,{}]}', "bad-entry"),
        ("n2", b'{"node":5,"seen_ms":1}', "bad-entry"),
        ("n2", b"not json", "bad-entry"),
        ("n2", b'{"seen_ms":1}', "bad-entry"),
        ("evil", entry(), "bad-entry"),  # names another node than its key
        ("Bad!", entry(node="Bad!"), "bad-entry"),
        ("n2", entry(handles=["Bad!"]), "bad-entry"),
        ("n2", entry(handles=["a", "b", "c", "d"]), "too-many-handles"),
        ("n2", entry(handles=["x" * 60] * 3, pad="y" * 2000), "entry-too-large"),
    ],
)
def test_a_bad_entry_is_skipped_with_its_code(key, raw, code):
    with pytest.raises(WireError) as e:
        d.decode_entry(key, raw, NOW, L)
    assert e.value.code == code and e.value.message


def test_a_future_seen_is_clamped():
    assert d.decode_entry("n2", entry(seen_ms=NOW + 10**9), NOW, L).seen_ms == NOW


def test_listing_leaves_out_itself_the_long_quiet_and_more_than_the_cap():
    es = [
        d.Entry(node="me", seen_ms=NOW),
        d.Entry(node="old", seen_ms=NOW - 61_000),
        d.Entry(node="a", seen_ms=NOW - 3),
        d.Entry(node="b", seen_ms=NOW - 1),
        d.Entry(node="c", seen_ms=NOW - 2),
    ]
    nodes, dropped = d.listing(es, "me", NOW, L)
    assert [n.node for n in nodes] == ["b", "c"] and dropped == 1


def test_a_name_is_taken_only_by_another_fresh_instance():
    mine = d.Entry(node="n", seen_ms=NOW, instance="me")
    other = d.Entry(node="n", seen_ms=NOW - 100, instance="them")
    stale = d.Entry(node="n", seen_ms=NOW - 10_000, instance="them")
    assert d.taken_by(mine, "me", NOW, 1500) is None
    assert d.taken_by(other, "me", NOW, 1500) == "them"
    assert d.taken_by(stale, "me", NOW, 1500) is None
    assert d.taken_by(None, "me", NOW, 1500) is None


def test_a_bounce_names_the_original_and_parses_back():
    text = outbound.bounce_body(
        "n2",
        "20261130T000000.000Z-0001",
        "bob@n2",
        "hi",
        "k",
        "bad-handle",
        "recipient 'Bad!'\nis not a handle",
    )
    assert "20261130T000000.000Z-0001" in text and "bob@n2" in text
    assert outbound.parse_bounce(text) == ("bad-handle", "recipient 'Bad!' is not a handle")
    assert outbound.bounce_subject("expired", "deploy") == "Undelivered [expired]: deploy"
    assert len(outbound.bounce_subject("x", "s" * 500)) <= 200
    assert outbound.bounce_key("n1", "a@n1", "k") == outbound.bounce_key("n1", "a@n1", "k")
    assert outbound.bounce_key("n1", "a@n1", "k") != outbound.bounce_key("n1", "a@n1", "k2")
    assert outbound.is_bounce("postmaster@n2") and not outbound.is_bounce("bob@n2")
