"""Replies, search and threads across nodes: two real daemons (node1, node2), each with a
real `bench bridge`, over a real `nats-server -js` on loopback.

A message keeps one identity wherever it lands (`origin` in the copy's front matter),
replies name it by that identity, and every command that takes a sender or recipient
takes an address (`bob@node2`)."""

import pytest

from tests.conformance.test_bridge import mailbox
from tests.conftest import wait_for
from tests.nodes import Node, bridged_pair, have_bridge

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))


@pytest.fixture
def pair():
    with bridged_pair() as (n1, n2, _server):
        yield n1, n2


def one(node: Node, handle: str, what: str, n: int = 1) -> list[dict]:
    """The mailbox once it holds `n` messages, oldest first."""
    wait_for(lambda: len(mailbox(node, handle)) >= n, 30, what)
    return sorted(mailbox(node, handle), key=lambda x: x["id"])


def test_mail_reply_crosses_back_in_both_directions(pair):
    n1, n2 = pair
    # Mail from operator@node2, answered on node1: the reply goes back to node2.
    q = n2.send("alice@node1", "is the build green?", "-s", "build")
    (copy,) = one(n1, "alice", "alice's copy")
    assert copy["from"] == "operator@node2" and copy["origin"] == f"{q['mail_id']}@node2"
    r = n1.d.ok("mail", "reply", copy["id"], "-m", "green")
    assert [(s["to"], s["note"]) for s in r["sent"]] == [("operator@node2", "queued-for-node2")]
    assert r["in_reply_to"] == f"{q['mail_id']}@node2"
    (back,) = one(n2, "operator", "the reply on node2")
    assert (back["from"], back["subject"], back["body"]) == ("operator@node1", "Re: build", "green")
    # It names the message by its identity: on node2, where it was sent from, its own id.
    assert back["in-reply-to"] == q["mail_id"]

    # Mail on node1 whose reply-to names carol on node2 (and dave here): one reply each,
    # each with its own key derived from the reply's.
    b = n1.send(
        "bob", "who reviews?", "-s", "review", "--reply-to", "dave", "--reply-to", "carol@node2"
    )
    r = n1.d.ok("mail", "reply", b["mail_id"], "-m", "carol does", "--key", "rv-1")
    assert [(s["to"], s["key"]) for s in r["sent"]] == [
        ("dave", "rv-1:dave"),
        ("carol@node2", "rv-1:carol@node2"),
    ]
    again = n1.d.ok("mail", "reply", b["mail_id"], "-m", "carol does", "--key", "rv-1")
    assert [s["duplicate"] for s in again["sent"]] == [True, True]
    (c,) = one(n2, "carol", "carol's copy")
    assert (c["from"], c["subject"], c["body"]) == ("operator@node1", "Re: review", "carol does")
    assert c["in-reply-to"] == f"{b['mail_id']}@node1"
    (d,) = one(n1, "dave", "dave's copy")
    assert d["in-reply-to"] == b["mail_id"]

    # In words, a reply across nodes says where it was queued.
    text = n2.d.bench("mail", "reply", c["id"], "-m", "thanks")
    assert text.rc == 0 and text.out.startswith("queued "), text
    assert "for operator@node1 (node node1)" in text.out


def test_reply_to_a_message_named_by_its_identity_and_bad_names(pair):
    n1, n2 = pair
    q = n2.send("alice@node1", "ping", "-s", "p")
    one(n1, "alice", "alice's copy")
    # Its id on node2, where it was sent from, names the copy on node1 too.
    r = n1.d.ok("mail", "reply", f"{q['mail_id']}@node2", "-m", "pong")
    assert [s["to"] for s in r["sent"]] == ["operator@node2"]
    # A reply-to on a node never seen: every reply is checked before any goes, so the
    # refusal comes first and dave gets nothing (no reply half sent).
    b = n1.send("bob", "to two", "--reply-to", "dave", "--reply-to", "erin@node9")
    res = n1.d.bench("mail", "reply", b["mail_id"], "-m", "x")
    assert res.rc == 1 and "[unknown-node]" in res.err and "was sent" not in res.err, res
    assert n1.d.ok("mail", "list", "--handle", "dave", "--state", "all")["messages"] == []
    for bad, code in [
        (f"{q['mail_id']}@Node2", "bad-id"),
        ("not-an-id@node2", "bad-id"),
        (f"{q['mail_id']}@node9", "no-such-message"),
    ]:
        res = n1.d.bench("mail", "reply", bad, "-m", "x")
        assert res.rc == 1 and f"[{code}]" in res.err and "Traceback" not in res.err, res


def test_search_from_an_address(pair):
    n1, n2 = pair
    n2.send("alice@node1", "deploy finished over there", "-s", "deploy")
    one(n1, "alice", "alice's copy")
    n1.send("bob", "deploy started here")
    n1.send("carol@node2", "deploy notes for carol")  # its queued copy: from operator@node1

    def hits(sender: str) -> list[tuple[str, str]]:
        a = n1.d.ok("mail", "search", "deploy", "--from", sender)
        return sorted((h["from"], h["handle"]) for h in a["hits"])

    assert hits("operator@node2") == [("operator@node2", "alice")]
    # Mail from the operator here is `operator` in a mailbox and `operator@node1` queued.
    mine = [("operator", "bob"), ("operator@node1", "@outbound")]
    assert hits("operator@node1") == hits("operator") == mine
    text = n1.d.bench("mail", "search", "deploy", "--from", "operator@node2")
    assert text.rc == 0 and "  operator@node2 " in text.out and "1 match\n" in text.out
    # The queued copy lists its real recipient, not the queue's mailbox.
    a = n1.d.ok("mail", "search", "notes", "--from", "operator")
    assert [(h["handle"], h["to"]) for h in a["hits"]] == [("@outbound", "carol@node2")]
    text = n1.d.bench("mail", "search", "notes").out
    assert "carol@node2" in text and "@outbound" not in text
    for bad, code in [("Operator@node2", "bad-handle"), ("operator@Node2", "bad-node")]:
        res = n1.d.bench("mail", "search", "deploy", "--from", bad)
        assert res.rc == 1 and f"[{code}]" in res.err and "Traceback" not in res.err, res


def test_thread_across_nodes_shows_the_whole_conversation_on_both_sides(pair):
    n1, n2 = pair
    a = n1.send("carol@node2", "shall we ship?", "-s", "ship")
    (a2,) = one(n2, "carol", "carol's copy")
    b = n2.d.ok("mail", "reply", a2["id"], "-m", "after the tests")["sent"][0]
    (b1,) = one(n1, "operator", "the answer on node1")
    c = n1.d.ok("mail", "reply", b1["id"], "-m", "tests are green")["sent"][0]
    c2 = one(n2, "operator", "the last word on node2")[-1]

    identities = [f"{a['mail_id']}@node1", f"{b['mail_id']}@node2", f"{c['mail_id']}@node1"]
    bodies = ["shall we ship?", "after the tests", "tests are green"]
    t1 = n1.d.ok("mail", "thread", a["mail_id"])["messages"]
    t2 = n2.d.ok("mail", "thread", c2["id"])["messages"]
    for t in (t1, t2):
        assert [x["origin"] for x in t] == identities
        assert [x["body"] for x in t] == bodies
    # Each side lists its own copies: the ones it sent with their real recipients.
    assert [(x["from"], x["to"]) for x in t1] == [
        ("operator@node1", "carol@node2"),
        ("operator@node2", "operator"),
        ("operator@node1", "operator@node2"),
    ]
    assert [(x["from"], x["to"]) for x in t2] == [
        ("operator@node1", "carol"),
        ("operator@node2", "operator@node1"),
        ("operator@node1", "operator"),
    ]
    # Asked by any message's identity, or any id, each node answers the whole thread.
    for node, thread in ((n1, t1), (n2, t2)):
        ids = [x["mail_id"] for x in thread]
        for ref in identities + ids:
            got = node.d.ok("mail", "thread", ref)["messages"]
            assert [x["mail_id"] for x in got] == ids, (node.name, ref)

    text = n1.d.bench("mail", "thread", b1["id"]).out
    assert f"{a['mail_id']}  operator@node1 -> carol@node2" in text
    assert "@outbound" not in text
    assert f"(sent as {b['mail_id']}@node2)" in text
    # The copies node1 sent are forwarded (JetStream has them), not read by anyone here.
    wait_for(
        lambda: n1.d.bench("mail", "thread", b1["id"]).out.count("[forwarded]") == 2,
        30,
        "both copies marked forwarded",
    )
    heads = [x for x in n1.d.bench("mail", "thread", b1["id"]).out.splitlines() if " -> " in x]
    states = [h.split("  [", 1)[1].split("]", 1)[0] for h in heads]
    assert states[0] == states[2] == "forwarded" and states[1] in ("unread", "read"), states


def moving(messages: list[dict]) -> list[dict]:
    """Messages without what the bridge changes as it sends them (state, path)."""
    return [{k: v for k, v in x.items() if k not in ("state", "path")} for x in messages]


def test_mcp_reply_and_thread_with_addresses(pair, tmp_path):
    pytest.importorskip("mcp", reason="the MCP SDK (the bench[mcp] extra) is not installed")
    from tests.conformance.test_mcp import ok, session, with_mcp

    n1, n2 = pair
    alice = session(n1.d, tmp_path, "alice")
    q = n2.send("alice@node1", "what is six times seven?", "-s", "quiz")
    (copy,) = one(n1, "alice", "alice's copy")
    origin = f"{q['mail_id']}@node2"

    async def scenario(c):
        replied = ok(await c.call_tool("reply", {"id": copy["id"], "body": "42"}))
        thread = ok(await c.call_tool("thread", {"id": copy["id"]}))
        by_origin = ok(await c.call_tool("thread", {"id": origin}))
        found = ok(await c.call_tool("search_mail", {"query": "quiz", "sent_by": "operator@node2"}))
        return replied, thread, by_origin, found

    replied, thread, by_origin, found = with_mcp(n1.dir, scenario, token=alice["token"])
    assert [s["to"] for s in replied["sent"]] == ["operator@node2"]
    # alice sees her own reply, queued for node2, with its real recipient.
    assert [(x["from"], x["to"], x["origin"]) for x in thread["messages"]] == [
        ("operator@node2", "alice", origin),
        ("alice@node1", "operator@node2", f"{replied['sent'][0]['mail_id']}@node1"),
    ]
    # The same thread by either id. The bridge may take the queued reply between the two
    # calls (inbox/ -> read/ of @outbound): its state and path are not compared.
    assert moving(by_origin["messages"]) == moving(thread["messages"])
    assert [h["from"] for h in found["hits"]] == ["operator@node2"]

    (back,) = one(n2, "operator", "alice's answer on node2")
    assert (back["from"], back["in-reply-to"], back["body"]) == ("alice@node1", q["mail_id"], "42")
    t2 = n2.d.ok("mail", "thread", q["mail_id"])["messages"]
    assert [x["origin"] for x in t2] == [x["origin"] for x in thread["messages"]]
