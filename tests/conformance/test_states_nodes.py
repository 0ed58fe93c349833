"""Delivery states of mail to another node, as its sender sees them: `queued` when it
is accepted for the other node, and `replied` when the answer comes back (its
in-reply-to names the message by its id here). Two real daemons with real bridges over
a real nats-server."""

import pytest

from tests.conformance.test_bridge_threads import one, pair  # noqa: F401 - the fixture
from tests.conftest import wait_for
from tests.nodes import have_bridge

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))


def test_queued_then_replied_across_nodes(pair):  # noqa: F811 - the fixture
    n1, n2 = pair
    q = n2.send("alice@node1", "is the build green?", "-s", "build")
    a = n2.d.ok("mail", "status", q["mail_id"])
    assert a["to"] == "alice@node1" and a["states"][0]["state"] == "queued"
    (copy,) = one(n1, "alice", "alice's copy")
    r = n1.d.ok("mail", "reply", copy["id"], "-m", "green")
    reply_id = r["sent"][0]["mail_id"]
    one(n2, "operator", "the reply on node2")

    def replied():
        x = n2.d.ok("mail", "status", q["mail_id"])
        return x if x["state"] == "replied" else None

    a = wait_for(replied, 30, "the replied state on node2")
    got = {s["state"]: s for s in a["states"]}
    assert set(got) >= {"queued", "replied"}
    assert got["replied"]["reply"] != reply_id  # named by its id on node2, where it landed
    listed = n2.d.ok("mail", "sent", "--to", "alice@node1")["messages"]
    assert [(x["mail_id"], x["state"]) for x in listed] == [(q["mail_id"], "replied")]


def _status(node, mail_id: str) -> dict[str, dict]:
    return {s["state"]: s for s in node.d.ok("mail", "status", mail_id)["states"]}


def _until(node, mail_id: str, state: str, what: str) -> dict[str, dict]:
    def reached():
        got = _status(node, mail_id)
        return got if state in got else None

    return wait_for(reached, 30, what)


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
    (ev,) = [e for e in n1.d.events(kind="bridge/receipt") if e["state"] == "read"]
    assert (ev["mail_id"], ev["node"], ev["by"]) == (q["mail_id"], "node2", "read")
    listed = n1.d.ok("mail", "sent", "--state", "read")["messages"]
    assert [x["mail_id"] for x in listed] == [q["mail_id"]]

    # Durable on the sender's node: its daemon restarted keeps both.
    n1.kill_bridge()
    n1.d.stop()
    n1.d.start()
    after = _status(n1, q["mail_id"])
    assert after["delivered"] == got["delivered"] and after["read"] == got["read"]
