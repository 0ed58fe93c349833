"""Delivery states of mail to another node, as its sender sees them: `queued` when it
is accepted for the other node, `delivered` and `read` from the receipts that node's
bridge sends back (only that node may speak of it), and `replied` when the answer
comes back (its in-reply-to names the message by its id here). Two real daemons with
real bridges over a real nats-server."""

import pytest

from tests.conformance.test_bridge_threads import one, pair  # noqa: F401 - the fixture
from tests.conformance.test_waits import as_
from tests.conftest import spawn_standin, wait_for
from tests.nodes import have_bridge

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))


def test_queued_then_replied_across_nodes(pair):  # noqa: F811 - the fixture
    n1, n2 = pair
    spawn_standin(n1.d, "alice")
    q = n2.send("alice@node1", "is the build green?", "-s", "build")
    a = n2.d.ok("mail", "status", q["mail_id"])
    assert a["to"] == "alice@node1" and a["states"][0]["state"] == "queued"
    (copy,) = one(n1, "alice", "alice's copy")
    # node1's operator answering in alice's stead is no reply from the recipient: the
    # message stays as it is (only alice@node1 answers it).
    stranger = n1.d.ok("mail", "reply", copy["id"], "-m", "not alice")
    assert "did not receive" in stranger["sent"][0]["not_a_reply"]
    one(n2, "operator", "the operator's answer on node2")
    r = n1.d.ok("mail", "reply", copy["id"], "-m", "green", env=as_(n1.d, "alice"))
    assert r["sent"][0].get("not_a_reply") is None
    reply_id = r["sent"][0]["mail_id"]
    mine = one(n2, "operator", "the reply on node2", n=2)
    assert [x["from"] for x in mine] == ["operator@node1", "alice@node1"]

    def replied():
        x = n2.d.ok("mail", "status", q["mail_id"])
        return x if x["state"] == "replied" else None

    a = wait_for(replied, 30, "the replied state on node2")
    got = {s["state"]: s for s in a["states"]}
    assert set(got) >= {"queued", "replied"}
    assert got["replied"]["reply"] != reply_id  # named by its id on node2, where it landed
    assert got["replied"]["reply"] == mine[1]["id"]  # alice's, not the operator's
    listed = n2.d.ok("mail", "sent", "--to", "alice@node1")["messages"]
    assert [(x["mail_id"], x["state"]) for x in listed] == [(q["mail_id"], "replied")]


def _status(node, mail_id: str) -> dict[str, dict]:
    return {s["state"]: s for s in node.d.ok("mail", "status", mail_id)["states"]}


def _until(node, mail_id: str, state: str, what: str) -> dict[str, dict]:
    def reached():
        got = _status(node, mail_id)
        return got if state in got else None

    # A bridge just started connects, pulls and hears back from the other node: on a
    # loaded 2-core machine that can take longer than one answer does.
    return wait_for(reached, 90, what)


def test_delivered_then_read_come_back_as_receipts(pair):  # noqa: F811 - the fixture
    n1, n2 = pair
    q = n1.send("bob@node2", "the deploy is yours", "-s", "deploy")
    got = _until(n1, q["mail_id"], "delivered", "the delivered receipt on node1")
    assert got["delivered"]["node"] == "node2"
    assert "read" not in got  # nobody read it there yet
    listed = n1.d.ok("mail", "sent", "--to", "bob@node2")["messages"]
    assert [(x["mail_id"], x["state"]) for x in listed] == [(q["mail_id"], "delivered")]

    (copy,) = one(n2, "bob", "bob's copy")
    n2.d.ok("mail", "read", "--handle", "bob")
    got = _until(n1, q["mail_id"], "read", "the read receipt on node1")
    assert (got["read"]["by"], got["read"]["node"]) == ("read", "node2")
    assert got["queued"]["at"] <= got["delivered"]["at"] <= got["read"]["at"]
    (ev,) = [e for e in n1.d.events(kind="bridge/receipt") if e.get("state") == "read"]
    assert (ev["mail_id"], ev["node"], ev["by"]) == (q["mail_id"], "node2", "read")
    listed = n1.d.ok("mail", "sent", "--state", "read")["messages"]
    assert [x["mail_id"] for x in listed] == [q["mail_id"]]

    # Durable on the sender's node: its daemon restarted keeps both.
    n1.kill_bridge()
    n1.d.stop()
    n1.d.start()
    after = _status(n1, q["mail_id"])
    assert after["delivered"] == got["delivered"] and after["read"] == got["read"]


def test_a_wake_there_is_woken_and_read_by_the_wake_here(pair):  # noqa: F811 - the fixture
    n1, n2 = pair
    spawn_standin(n2.d, "carol")
    q = n1.send("carol@node2", "wake up over there")
    got = _until(n1, q["mail_id"], "read", "the read receipt of the wake")
    assert (got["read"]["by"], got["read"]["node"]) == ("wake", "node2")
    assert got["woken"]["at"] == got["read"]["at"] and "not-woken" not in got
    assert n1.d.ok("mail", "status", q["mail_id"])["state"] == "woken"


def test_a_read_after_the_receiving_daemon_restarted_is_still_reported(pair):  # noqa: F811
    n1, n2 = pair
    q = n1.send("dave@node2", "read me later")
    _until(n1, q["mail_id"], "delivered", "the delivered receipt")
    one(n2, "dave", "dave's copy")
    # node2's daemon forgets what it delivered; the copy's file still names its origin.
    n2.kill_bridge()
    n2.d.stop()
    n2.d.start()
    n2.start_bridge()
    n2.d.ok("mail", "read", "--handle", "dave")
    got = _until(n1, q["mail_id"], "read", "the read receipt after node2's restart")
    assert (got["read"]["by"], got["read"]["node"]) == ("read", "node2")


def test_a_node_cannot_mark_another_nodes_mail_delivered_or_read():
    """node3 (its own NATS user, as documented) sends receipts for mail node1 sent to
    node2: as itself they are ignored on node1 with an event; as node2 NATS refuses
    them. The state stays `queued` until node2's own receipts come."""
    import asyncio

    import msgspec
    import nats as nats_py

    from bench_wire import messages as m
    from tests.conformance.test_bridge_trust import _as, _auth_server
    from tests.nodes import Node, wait_known

    users = {"node1": "pw-one", "node2": "pw-two", "node3": "pw-three"}
    server = _auth_server(users)
    n1 = Node("node1", server).start()
    n2 = Node("node2", server).start()
    try:
        for n in (n1, n2):
            n.nats_url = _as(server, n.name, users[n.name])
            n.start_bridge()
        wait_known(n1, n2)
        n2.kill_bridge()  # node2 takes nothing for now: only the forger speaks
        q = n1.send("bob@node2", "for bob only", "-s", "private")
        wait_for(lambda: n1.d.events(kind="bridge/forwarded"), 30, "the mail in the stream")
        refused: list[str] = []

        async def forge():
            async def on_error(err):
                refused.append(str(err))

            nc = await nats_py.connect(
                _as(server, "node3", users["node3"]), error_cb=on_error, inbox_prefix="_INBOX_node3"
            )
            js = nc.jetstream()
            lies = [
                m.Receipt(mail_id=q["mail_id"], state="delivered", at=1),
                m.Receipt(mail_id=q["mail_id"], state="read", at=2, by="read"),
                m.Receipt(mail_id="20261130T000000.000Z-0001", state="read", at=3, by="wake"),
                m.Receipt(mail_id="../../etc/passwd", state="read", by="read"),
            ]
            # As itself: stored, taken by node1's bridge, and ignored by its daemon.
            await js.publish("bench.mail.node1.node3.@receipts", msgspec.json.encode(lies))
            # As node2: NATS refuses the subject.
            with pytest.raises(nats_py.errors.Error):
                await js.publish(
                    "bench.mail.node1.node2.@receipts", msgspec.json.encode(lies), timeout=3
                )
            await nc.close()

        asyncio.run(forge())
        assert any("permissions violation" in x.lower() for x in refused), refused
        ignored = wait_for(
            lambda: (lambda e: e if len(e) >= 4 else None)(
                n1.d.events(kind="bridge/receipt-ignored")
            ),
            30,
            "node3's receipts ignored on node1",
        )
        assert [(e["node"], e["code"]) for e in ignored] == [
            ("node3", "wrong-node"),
            ("node3", "wrong-node"),
            ("node3", "unknown-mail"),
            ("node3", "bad-receipt"),
        ]
        assert not [e for e in n1.d.events(kind="bridge/receipt") if e["kind"] == "bridge/receipt"]
        assert list(_status(n1, q["mail_id"])) == ["queued"]

        # node2's bridge back: its own receipt is the one recorded.
        n2.start_bridge()
        got = _until(n1, q["mail_id"], "delivered", "node2's own receipt")
        assert got["delivered"]["node"] == "node2" and "read" not in got
    finally:
        n1.close()
        n2.close()
        server.close()


def test_receipts_from_the_right_node_are_clamped_and_bounded(pair):  # noqa: F811
    """node2 may speak of mail sent to it, within bounds: times clamped between queued
    and arrival, a state it cannot tell ignored, garbage and oversized batches dropped
    by the bridge with a line. (No per-node users here: the raw publish stands for
    node2's bridge.)"""
    import asyncio
    import time

    import msgspec
    import nats as nats_py

    from bench_wire import messages as m

    n1, n2 = pair
    n2.kill_bridge()
    q = n1.send("bob@node2", "clamp me")
    wait_for(lambda: n1.d.events(kind="bridge/forwarded"), 30, "the mail in the stream")
    ten_years = 10 * 365 * 86400 * 1000
    subject = "bench.mail.node1.node2.@receipts"

    async def speak():
        nc = await nats_py.connect(n1.nats_url)
        js = nc.jetstream()
        await js.publish(subject, b"not json")
        many = [m.Receipt(mail_id=q["mail_id"], state="delivered")] * 257
        await js.publish(subject, msgspec.json.encode(many))
        said = [
            m.Receipt(
                mail_id=q["mail_id"], state="delivered", at=int(time.time() * 1000) + ten_years
            ),
            m.Receipt(mail_id=q["mail_id"], state="read", at=5, by="telepathy"),
            m.Receipt(mail_id=q["mail_id"], state="read", at=5, by="read"),
        ]
        await js.publish(subject, msgspec.json.encode(said))
        await nc.close()

    asyncio.run(speak())
    got = _until(n1, q["mail_id"], "read", "node2's receipts")
    assert got["read"]["at"] == got["queued"]["at"]  # 5 ms after 1970: clamped to queued
    assert got["queued"]["at"] <= got["delivered"]["at"]
    events = [e for e in n1.d.events(kind="bridge/receipt") if e["kind"] == "bridge/receipt"]
    (delivered,) = [e for e in events if e["state"] == "delivered"]
    assert delivered["at"] <= int(time.time() * 1000)  # not ten years ahead
    (bad,) = n1.d.events(kind="bridge/receipt-ignored")
    assert (bad["node"], bad["code"]) == ("node2", "bad-receipt") and "telepathy" in bad["reason"]
    out = n1.bridge_output()
    assert "not receipts" in out and "257 receipts in one message" in out
