"""Long threads through the real daemon and CLI: `bench mail thread ID` always holds ID;
a thread longer than the cap is cut to ID's neighbourhood (the root, the nearest
messages above and the nearest replies below), and both --json and the text say what
was left out and which command shows it. An index from before threads stored their
roots is given them at start.
"""

import json
import os
import sqlite3
import sys

from bench_wire.client import Client, request
from tests.conftest import ROOT, assert_refused, wait_for

INPTY = os.path.join(ROOT, "tests", "reliability", "inpty.py")
DEPTH = 1000


def build_chain(d, n: int) -> list[str]:
    """n messages, each a reply to the one before, alternately to alice and bob (one
    connection, so the chain takes seconds, not n CLI starts)."""
    ids: list[str] = []
    with Client(d.dir, timeout=120.0) as c:
        for i in range(n):
            a = c.call(
                request(
                    "mail/send",
                    {
                        "to": "alice" if i % 2 == 0 else "bob",
                        "body": f"hop {i}",
                        "in_reply_to": ids[-1] if ids else None,
                    },
                )
            )
            ids.append(a["mail_id"])
    return ids


def positions(ids: list[str], answer: dict) -> list[int]:
    return [ids.index(x["mail_id"]) for x in answer["messages"]]


def test_a_thousand_deep_thread_from_the_middle_the_leaf_and_a_reply(make_daemon, tmp_path):
    d = make_daemon("--operator-send-burst", "5000")
    ids = build_chain(d, DEPTH)
    cap = d.call({"verb": "hello"})["caps"]["thread_max"]
    assert cap < DEPTH

    # From the middle: the message, the root, and the nearest above and below.
    middle = DEPTH // 2
    a = d.ok("mail", "thread", ids[middle])
    got = positions(ids, a)
    assert middle in got and 0 in got and len(got) == cap
    assert got == sorted(got)  # oldest first
    above, below = [k for k in got if 0 < k < middle], [k for k in got if k > middle]
    assert above == list(range(middle - len(above), middle))
    assert below == list(range(middle + 1, middle + 1 + len(below)))
    assert abs(len(above) - len(below)) <= 1  # ring by ring: as near above as below
    assert a["truncated"] is True and a["cap"] == cap
    left = a["left_out"]
    assert left["ancestors"] == middle - 1 - len(above)
    assert left["replies"] is True
    assert left["above"] == ids[above[0]] and left["below"] == ids[below[-1]]

    # From the leaf: everything chosen is above it.
    leaf = DEPTH - 1
    a = d.ok("mail", "thread", ids[leaf])
    got = positions(ids, a)
    assert leaf in got and 0 in got and len(got) == cap
    assert a["left_out"]["ancestors"] == leaf - (cap - 1)
    assert a["left_out"]["replies"] is False and a["left_out"]["below"] is None
    # Asking about the farthest shown goes on up the thread.
    further = positions(ids, d.ok("mail", "thread", a["left_out"]["above"]))
    assert min(k for k in further if k > 0) < min(k for k in got if k > 0)

    # A reply to the leaf (by the operator, then by bob, whose mailbox holds the leaf).
    reply = d.ok("mail", "reply", ids[leaf], "-m", "the end")["sent"][0]["mail_id"]
    a = d.ok("mail", "thread", reply)
    mine = [x["mail_id"] for x in a["messages"]]
    assert reply in mine and ids[leaf] in mine and ids[0] in mine
    rq, out = tmp_path / "bob.req.json", tmp_path / "bob.out.json"
    rq.write_text(
        json.dumps(
            [
                {"verb": "mail/reply", "mail_id": ids[leaf], "body": "bob's end"},
                {"verb": "mail/thread", "mail_id": ids[leaf]},
            ]
        )
    )
    d.ok("spawn", "--name", "bob", "--", sys.executable, INPTY, str(rq), str(out))
    wait_for(lambda: out.exists(), 60, "bob's answers")
    sent, thread = json.loads(out.read_text())["answers"]
    assert sent["ok"] is True, sent
    bobs = sent["sent"][0]["mail_id"]
    assert thread["ok"] is True and thread["truncated"] is True
    seen = [x["mail_id"] for x in thread["messages"]]
    assert ids[leaf] in seen and bobs in seen
    assert all(x["handle"] == "bob" or x["from"] == "bob" for x in thread["messages"])
    a = d.ok("mail", "thread", bobs)
    assert bobs in [x["mail_id"] for x in a["messages"]]

    # The text says it was cut, what was left out, and how to see more.
    text = d.bench("mail", "thread", ids[middle])
    assert text.rc == 0, text
    assert f"cut: the thread has more than {cap} messages" in text.out
    assert f"{middle - 1 - len(above)} earlier messages above" in text.out
    assert f"bench mail thread {ids[above[0]]}" in text.out
    assert f"bench mail thread {ids[below[-1]]}" in text.out


def test_a_limit_cuts_a_short_thread_and_is_checked(shared):
    ids = build_chain(shared, 6)  # a thread of its own: ids no other test's mail answers
    a = shared.ok("mail", "thread", ids[3], "--limit", "3")
    assert positions(ids, a) == [0, 2, 3]
    assert a["left_out"] == {
        "ancestors": 1,
        "replies": True,
        "above": ids[2],
        "below": ids[4],
    }
    whole = shared.ok("mail", "thread", ids[3])
    assert positions(ids, whole) == list(range(6)) and whole["truncated"] is False
    assert whole["left_out"] is None
    r = shared.call({"verb": "mail/thread", "mail_id": ids[3], "limit": 100_000})
    assert_refused(r, "bad-limit")


def test_an_index_from_before_thread_roots_is_given_them_at_start(daemon):
    d = daemon
    ids = build_chain(d, 8)
    d.stop()
    db = sqlite3.connect(os.path.join(d.dir, "index.sqlite"))
    db.executescript(
        "DROP INDEX links_by_root; ALTER TABLE mail_links DROP COLUMN root; "
        "ALTER TABLE mail_links DROP COLUMN depth; UPDATE meta SET v='1' WHERE k='search';"
    )
    db.close()
    d.start()
    a = d.ok("mail", "thread", ids[7], "--limit", "4")
    assert positions(ids, a) == [0, 5, 6, 7]
    assert a["left_out"]["ancestors"] == 4
    assert positions(ids, d.ok("mail", "thread", ids[4])) == list(range(8))
