"""The bridge's pure rules: dedup ids, what the receiving bridge admits, and which
stream configurations it trusts."""

import pytest

pytest.importorskip("nats")

from nats.js import api  # noqa: E402

from bench_bridge import natsside, streams  # noqa: E402
from bench_bridge.admission import Admission  # noqa: E402
from bench_wire import messages as m  # noqa: E402


def _mail(to: str = "bob@node2", **kw) -> m.RemoteMail:
    return m.RemoteMail(
        mail_id="20261201T000000.000Z-0001", sender="alice@node1", to=to, key="k", **kw
    )


def test_the_dedup_id_is_the_nonce_when_the_queue_file_has_one():
    with_nonce = _mail(nonce="ab" * 16)
    assert natsside.msg_id("node1", with_nonce) == f"node1 {'ab' * 16}"
    # Mail queued before nonces keeps the old id, so its republish is still deduplicated.
    old = _mail(body="hi")
    assert natsside.msg_id("node1", old).startswith("node1 alice@node1 k ")
    assert natsside.msg_id("node1", old) == natsside.msg_id("node1", _mail(body="hi"))


def test_reply_to_cap_and_new_mailboxes_per_origin():
    a = Admission(reply_to_max=2, new_mailboxes_per_hour=2)
    r = a.refusal("node1", _mail(reply_to=["a@node1", "b@node1", "c@node1"]), [])
    assert r is not None and r.code == "too-many-recipients"
    assert a.refusal("node1", _mail(reply_to=["a@node1", "b@node1"]), []) is None  # bob: new
    assert a.refusal("node1", _mail("carol@node2"), []) is None
    r = a.refusal("node1", _mail("dave@node2"), [])
    assert r is not None and r.code == "new-mailbox-rate"
    # Known recipients and live handles cost nothing; another origin has its own budget.
    assert a.refusal("node1", _mail("bob@node2"), []) is None
    assert a.refusal("node1", _mail("erin@node2"), ["erin"]) is None
    assert a.refusal("node3", _mail("dave@node2"), []) is None


def test_only_the_documented_configuration_is_trusted():
    q = streams.Quotas()
    want = streams.mail_config(q)
    assert streams.problems(streams.mail_config(q), want, 7 * 86400) == []
    assert streams.problems(streams.directory_config(q), streams.directory_config(q), 0) == []
    spy = streams.mail_config(q)
    spy.republish = api.RePublish(src="bench.mail.>", dest="spy.>")
    assert any("republishes" in p for p in streams.problems(spy, want, 0))
    for change, words in (
        ({"mirror": api.StreamSource(name="X")}, "mirror"),
        ({"sources": [api.StreamSource(name="X")]}, "sources"),
        ({"subjects": ["bench.>"]}, "subjects"),
        ({"allow_rollup_hdrs": True}, "rollup"),
        ({"deny_purge": False}, "purge"),
        ({"duplicate_window": 1.0}, "dedup window"),
        ({"max_bytes": -1}, "no quotas"),
        ({"discard": api.DiscardPolicy.OLD}, "discard old"),
    ):
        bad = want.evolve(**change)
        assert any(words in p for p in streams.problems(bad, want, 0)), change
    short = want.evolve(max_age=3600.0)
    assert any("max_age" in p for p in streams.problems(short, want, 7 * 86400))


def test_a_queue_file_written_before_nonces_is_published_under_the_old_id():
    from benchd.core import frontmatter
    from benchd.runtime.outbound import remote_mail

    old_file = (
        b'---\nid: "20261201T000000.000Z-0001"\nfrom: "alice@node1"\nto: "bob@node2"\n'
        b'date: "2026-12-01T00:00:00.000Z"\nkey: "k"\n---\n\nhi'
    )
    meta, body = frontmatter.read(old_file)
    x = remote_mail(meta, body, "node1")
    assert x.nonce == "" and natsside.msg_id("node1", x).startswith("node1 alice@node1 k ")
    new_file = old_file.replace(b'key: "k"\n', b'key: "k"\nnonce: "' + b"cd" * 16 + b'"\n')
    meta, body = frontmatter.read(new_file)
    assert natsside.msg_id("node1", remote_mail(meta, body, "node1")) == f"node1 {'cd' * 16}"


def test_receipts_are_bounded_per_message_and_per_origin_a_minute():
    from bench_bridge import urls

    a = Admission(receipts_per_minute=300)
    assert a.receipts_refusal("node2", 0) is not None  # an empty message is malformed
    assert "[bad-receipt]" in (a.receipts_refusal("node2", 257) or "")
    assert a.receipts_refusal("node2", 256) is None
    assert "[receipt-rate]" in (a.receipts_refusal("node2", 100) or "")
    assert a.receipts_refusal("node2", 44) is None  # what is left of the minute's 300
    assert a.receipts_refusal("node3", 256) is None  # another origin has its own budget
    assert a.receipts_said("node2") and not a.receipts_said("node2")  # once a minute
    # Receipts travel under the sender's own subjects, on a token no handle can be.
    s = urls.receipt_subject("node1", "node.2")
    assert s == "bench.mail.node1.node~2.@receipts"
    assert urls.is_receipts(s) and urls.origin_of(s) == "node.2"
    assert not urls.is_receipts(urls.subject("node1", "node2", "bob"))
