"""Node names, addresses, the sender rule for mail from NATS, the URL rule (pure)."""

import time

import pytest

from bench_bridge import urls
from bench_wire.addresses import check_address, split_address
from bench_wire.errors import WireError
from bench_wire.messages import NodeInfo
from benchd.runtime.nodes import Directory, default_node, remote_sender


@pytest.mark.parametrize(
    "bad,code",
    [
        ("bob@", "bad-node"),
        ("@node", "bad-handle"),
        ("bob@Node", "bad-node"),
        ("bob@a@b", "bad-node"),
        ("Bob@n", "bad-handle"),
        ("", "bad-handle"),
        (7, "bad-handle"),
        (None, "bad-handle"),
    ],
)
def test_split_addresses(bad, code):
    assert split_address("bob") == ("bob", None)
    assert split_address("bob@node2") == ("bob", "node2")
    with pytest.raises(WireError) as e:
        split_address(bad, "recipient")
    assert e.value.code == code and repr(bad) in e.value.message


def test_check_address():
    assert check_address("erin@node2") == "erin@node2"
    with pytest.raises(WireError):
        check_address(7)


def test_default_node_is_a_valid_name():
    split_address(f"x@{default_node()}")


@pytest.mark.parametrize(
    "sender,want",
    [
        ("alice@node1", "alice@node1"),  # a remote address is kept
        ("alice", "alice@node1"),  # no node: the origin's
        ("alice@node2", "alice@node1"),  # claims this node: the origin's
        ("operator", "operator@node1"),
        ("Bad!@node1", "unknown@node1"),
        ("alice@Bad!", "unknown@node1"),  # no part of a malformed address is believed
    ],
)
def test_a_remote_sender_never_names_this_node(sender, want):
    assert remote_sender(sender, "node1", own="node2") == want


NOW = int(time.time() * 1000)


def test_directory_persists_new_nodes(tmp_path):
    p = str(tmp_path / "nodes.json")
    d = Directory(p, "node1")
    assert d.knows("node1") and not d.knows("node2")
    d.update(
        [
            NodeInfo(node="node2", seen_ms=NOW - 5, handles=["bob"]),
            NodeInfo(node="node1", seen_ms=NOW - 6),
            NodeInfo(node="Bad!", seen_ms=NOW - 7),
        ]
    )
    again = Directory(p, "node1")
    assert again.knows("node2") and not again.knows("Bad!")
    assert again.listing() == [NodeInfo(node="node2", seen_ms=NOW - 5, handles=["bob"])]


def test_directory_forgets_what_the_bridge_no_longer_lists_and_the_long_quiet(tmp_path):
    p = str(tmp_path / "nodes.json")
    d = Directory(p, "node1")
    d.update([NodeInfo(node="node2", seen_ms=NOW), NodeInfo(node="node3", seen_ms=NOW)])
    d.update([NodeInfo(node="node2", seen_ms=NOW)])  # node3 purged from the bucket
    assert d.knows("node2") and not d.knows("node3")
    assert not Directory(p, "node1").knows("node3")  # written: the set changed
    d.forget_after = 60.0
    assert not d.knows("node2", now_ms=NOW + 61_000)
    d.update([NodeInfo(node="old", seen_ms=NOW - 120_000)], now_ms=NOW)
    assert not d.knows("old")
    d.update([NodeInfo(node="future", seen_ms=NOW + 10**12)], now_ms=NOW)
    assert d.nodes["future"].seen_ms == NOW


def test_directory_skips_a_damaged_entry(tmp_path):
    p = tmp_path / "nodes.json"
    p.write_text(f'[{{"node": "node2", "seen_ms": {NOW}, "handles": []}}, {{"node": 3}}, "x"]')
    assert Directory(str(p), "n").listing() == [NodeInfo(node="node2", seen_ms=NOW)]


def test_directory_survives_a_damaged_file(tmp_path):
    p = tmp_path / "nodes.json"
    p.write_text("{not json")
    assert Directory(str(p), "n").listing() == []


@pytest.mark.parametrize(
    "url",
    [
        "nats://127.0.0.1:4222",
        "nats://localhost:4222",
        "nats://[::1]:4222",
        "tls://nats.example.com:4222",
    ],
)
def test_urls_accepted(url):
    assert urls.check_url(url, tls=False, insecure=False) == url


def test_clear_text_to_another_host_needs_tls_or_insecure():
    with pytest.raises(WireError) as e:
        urls.check_url("nats://nats.example.com:4222", tls=False, insecure=False)
    assert e.value.code == "insecure-url"
    urls.check_url("nats://nats.example.com:4222", tls=True, insecure=False)
    urls.check_url("nats://nats.example.com:4222", tls=False, insecure=True)


@pytest.mark.parametrize("url", ["http://127.0.0.1", "nats://", "127.0.0.1:4222"])
def test_bad_urls(url):
    with pytest.raises(WireError) as e:
        urls.check_url(url, tls=False, insecure=False)
    assert e.value.code == "bad-url"


def test_subject_tokens_keep_nodes_apart():
    assert urls.subject("a.b", "n1", "x.y") == "bench.mail.a~b.n1.x~y"
    # node `a`'s filter bench.mail.a.> cannot match node `a.b`'s subjects
    assert not urls.subject("a.b", "n1", "x").startswith("bench.mail.a.")
    assert urls.consumer("a.b") == "bench-a~b"


def test_the_origin_is_the_subjects_fourth_token():
    assert urls.origin_of(urls.subject("n2", "a.b", "bob")) == "a.b"
    for bad in ("bench.mail.n2.bob", "bench.mail.n2..bob", "other.mail.n2.n1.bob", "x"):
        assert urls.origin_of(bad) is None


def test_a_password_is_never_shown():
    assert urls.shown("tls://n1:s3cret@h:4222") == "tls://n1:***@h:4222"
    assert urls.shown("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
