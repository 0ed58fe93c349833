"""Durable mail operations as values (benchd/core/sends.py): frozen, a change of kind is
a new value, and what each kind writes and logs."""

import msgspec
import pytest

from bench_wire import messages as m
from benchd.core.sends import (
    Bounce,
    Deliver,
    Forward,
    Queue,
    Retire,
    Send,
    front_matter,
    retired_events,
    sent_events,
)

SEND = Send(
    sender="alice@node1",
    to="bob",
    subject="hi",
    body=b"hello",
    key="k1",
    reply_to=("carol",),
    in_reply_to=None,
    live=True,
)
DATE = "2026-12-02T08:00:00.000Z"


def meta_of(spec: Send):
    return front_matter(spec, "20261202T080000.000Z-0001", spec.key or "auto", DATE)


def test_a_send_is_frozen():
    with pytest.raises(AttributeError):
        SEND.to = "mallory"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SEND.also_log = lambda mail_id: []  # type: ignore[attr-defined]


def test_a_change_of_kind_is_a_new_value_and_the_old_one_is_unchanged():
    q = Queue.of(SEND, mailbox="@outbound", address="bob@node2", reply_to=("c@n1",), nonce="n")
    assert type(q) is Queue and type(SEND) is Send
    assert (q.to, q.live, q.reply_to, q.address, q.capped) == (
        "@outbound",
        False,
        ("c@n1",),
        "bob@node2",
        False,
    )
    assert (SEND.to, SEND.live, SEND.address, SEND.capped) == ("bob", True, "bob", True)
    assert (q.sender, q.subject, q.body, q.key) == (SEND.sender, "hi", b"hello", "k1")


def test_each_kind_writes_its_front_matter():
    assert meta_of(SEND).to == "bob" and meta_of(SEND).origin is None
    q = Queue.of(SEND, mailbox="@outbound", address="bob@node2", reply_to=(), nonce="n1")
    meta = meta_of(q)
    assert (meta.to, meta.nonce, meta.origin) == ("bob@node2", "n1", None)
    d = Deliver.of(SEND, reply_to=(), origin_node="node2", origin_id="id9", bounced=None)
    assert meta_of(d).origin == "id9@node2" and meta_of(d).to == "bob"


def test_each_kind_logs_its_events():
    path = "/x/mail/bob/inbox/1.md"
    (sent,) = sent_events(SEND, meta_of(SEND), path)
    assert isinstance(sent, m.MailSent) and sent.to == "bob" and sent.live is True

    q = Queue.of(SEND, mailbox="@outbound", address="bob@node2", reply_to=(), nonce="n")
    (queued,) = sent_events(q, meta_of(q), path)
    assert isinstance(queued, m.BridgeQueued) and queued.to == "bob@node2"

    returned = m.BridgeBounced(
        mail_id="a", sender="x@n2", to="y", key="k", node="n1", code="c", reason="r"
    )
    b = Bounce.returning(q, returned)
    events = sent_events(b, meta_of(b), path)
    assert [type(e) for e in events] == [m.BridgeQueued, m.BridgeBounced]
    # The value itself: the log stamps seq and ts on its record, never on the event.
    assert events[1] is returned

    d = Deliver.of(SEND, reply_to=(), origin_node="node2", origin_id="id9", bounced=returned)
    events = sent_events(d, meta_of(d), path)
    assert [type(e) for e in events] == [m.MailSent, m.BridgeDelivered, m.BridgeBounced]
    assert events[1].origin == "node2" and events[1].origin_id == "id9"


def test_a_job_reply_logs_outbox_posted_with_its_recipient_whatever_its_kind():
    local = msgspec.structs.replace(SEND, outbox_reply=True)
    events = sent_events(local, meta_of(local), "p")
    assert isinstance(events[-1], m.OutboxPosted)
    assert (events[-1].key, events[-1].to) == ("k1", "bob")
    q = Queue.of(local, mailbox="@outbound", address="bob@node2", reply_to=(), nonce="n")
    events = sent_events(q, meta_of(q), "p")
    assert [type(e) for e in events] == [m.BridgeQueued, m.OutboxPosted]
    assert events[-1].to == "bob@node2"


def test_retirements_log_by_kind():
    assert retired_events(Retire("bob", "id1"), "dst") == []  # a wake's: nothing of its own
    (read,) = retired_events(Retire("bob", "id1", "bob", event=True), "dst")
    assert isinstance(read, m.MailReadEvent) and read.path == "dst" and read.reader == "bob"
    (fwd,) = retired_events(Forward("@outbound", "id1", key="k", to="bob@node2"), "dst")
    assert isinstance(fwd, m.BridgeForwarded) and (fwd.to, fwd.key) == ("bob@node2", "k")
