"""Mail search (FTS5 in the index), threads, replies: against the real daemon and CLI.

- ranking: a message about the word ranks above one that mentions it in passing
- scoping: a session finds only its own mail; the operator any mailbox
- answers carry snippets, never bodies
- the index is a cache: deleted, damaged, or from before search existed, it searches
  again after a restart
- threads link by in-reply-to across mailboxes; replies honour reply-to
"""

import os
import sqlite3

from bench_wire.errors import exit_code_for
from tests.reliability.test_access import run_in_session
from tests.support.refusal import assert_refused


def search(d, *args, **kw):
    return d.ok("mail", "search", *args, **kw)


def ids(a):
    return [h["mail_id"] for h in a["hits"]]


def test_ranking_puts_the_message_about_the_word_first(daemon):
    d = daemon
    passing = d.ok(
        "mail",
        "send",
        "alice",
        "-s",
        "weekly notes",
        "-m",
        "Lots of things happened. " * 20 + "Also the cache.",
    )["mail_id"]
    about = d.ok(
        "mail",
        "send",
        "alice",
        "-s",
        "cache eviction",
        "-m",
        "The cache evicts too early; the cache size is wrong.",
    )["mail_id"]
    d.ok("mail", "send", "alice", "-s", "other", "-m", "nothing relevant here")
    a = search(d, "cache")
    assert ids(a) == [about, passing]
    assert a["hits"][0]["handle"] == "alice" and a["hits"][0]["subject"] == "cache eviction"


def test_every_word_must_match_and_prefixes_work(daemon):
    d = daemon
    both = d.ok("mail", "send", "alice", "-m", "deploy the frobnicator today")["mail_id"]
    d.ok("mail", "send", "alice", "-m", "deploy something else")
    assert ids(search(d, "deploy frobnicator")) == [both]
    assert ids(search(d, "frob*")) == [both]
    assert search(d, "nonexistentword")["hits"] == []


def test_answers_carry_snippets_never_bodies(daemon):
    d = daemon
    body = ("filler words " * 400) + "the needle is here " + ("more filler " * 400)
    d.ok("mail", "send", "bob", "-s", "haystack", "-m", body)
    hit = search(d, "needle")["hits"][0]
    assert "body" not in hit
    assert "[needle]" in hit["snippet"] and len(hit["snippet"]) < 200
    assert hit["path"].endswith(hit["mail_id"] + ".md") and os.path.exists(hit["path"])


def test_filters_handle_from_since_limit(daemon):
    d = daemon
    d.ok("mail", "send", "alice", "-m", "apple one")
    d.ok("mail", "send", "bob", "-m", "apple two")
    assert {h["handle"] for h in search(d, "apple")["hits"]} == {"alice", "bob"}
    assert {h["handle"] for h in search(d, "apple", "--handle", "bob")["hits"]} == {"bob"}
    assert search(d, "apple", "--from", "carol")["hits"] == []
    assert len(search(d, "apple", "--from", "operator")["hits"]) == 2
    assert search(d, "apple", "--since", "2999-01-01")["hits"] == []
    assert len(search(d, "apple", "--since", "1h")["hits"]) == 2
    a = search(d, "apple", "--limit", "1")
    assert len(a["hits"]) == 1 and a["truncated"] is True


def test_bad_input_gets_codes_not_tracebacks(shared):
    d = shared
    for args, code in [
        (("***",), "bad-query"),
        (("x", "--limit", "0"), "bad-limit"),
        (("x", "--since", "yesterday-ish"), "bad-since"),
        (("x", "--handle", "../etc"), "bad-handle"),
        (("x", "--from", "Bad Handle"), "bad-handle"),
    ]:
        r = d.bench("mail", "search", *args, "--json")
        assert r.rc == exit_code_for(code), (args, r)
        assert_refused(r, code)
        assert "Traceback" not in r.err
    assert d.call({"verb": "hello"})["ok"] is True


def test_a_session_finds_only_its_own_mail(daemon, tmp_path):
    d = daemon
    d.ok("mail", "send", "bob", "-m", "secret plans for bob")
    mine = d.ok("mail", "send", "alice", "-m", "plans for alice")["mail_id"]
    rec = run_in_session(
        d,
        tmp_path,
        "alice",
        [
            {"verb": "mail/search", "query": "plans", "token": "$TOKEN"},
            {"verb": "mail/search", "query": "secret", "token": "$TOKEN"},
            {"verb": "mail/search", "query": "plans", "handle": "bob", "token": "$TOKEN"},
        ],
    )
    own, secret, other = rec["answers"]
    assert [h["mail_id"] for h in own["hits"]] == [mine], own
    assert secret["ok"] is True and secret["hits"] == [], secret
    assert_refused(other, "forbidden")
    assert len(search(d, "plans")["hits"]) == 2  # the operator sees both


def test_a_rebuilt_index_still_searches(daemon):
    d = daemon
    mid = d.ok("mail", "send", "alice", "-s", "rebuild", "-m", "zebra crossing")["mail_id"]
    index = os.path.join(d.dir, "index.sqlite")
    # 1. deleted: rebuilt from the files
    d.stop()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(index + suffix):
            os.unlink(index + suffix)
    d.start()
    assert ids(search(d, "zebra")) == [mid]
    # 2. damaged: set aside and rebuilt
    d.stop()
    with open(index, "r+b") as f:
        f.write(b"not a database at all" * 100)
    d.start()
    assert ids(search(d, "zebra")) == [mid]
    # 3. an index from before search existed (no search tables): filled at start
    d.stop()
    db = sqlite3.connect(index)
    db.executescript(
        "DROP TABLE mail_text; DROP TABLE mail_links; DELETE FROM meta WHERE k='search';"
    )
    db.close()
    d.start()
    assert ids(search(d, "zebra")) == [mid]
    # 4. after a kill -9 mid-way, mail delivered since still searches
    later = d.ok("mail", "send", "alice", "-m", "zebra again")["mail_id"]
    d.kill9()
    d.start()
    assert set(ids(search(d, "zebra"))) == {mid, later}


# ------------------------------------------------------------------ threads


def test_thread_links_replies_across_mailboxes_oldest_first(shared, who):
    d = shared
    first = d.ok("mail", "send", who, "-s", "question", "-m", "what is 6x7?")["mail_id"]
    answer = d.ok(
        "mail", "send", "operator", "-s", "Re: question", "-m", "42", "--in-reply-to", first
    )["mail_id"]
    thanks = d.ok("mail", "send", who, "-m", "thanks", "--in-reply-to", answer)["mail_id"]
    d.ok("mail", "send", who, "-m", "unrelated")
    for start in (first, answer, thanks):
        a = d.ok("mail", "thread", start)
        assert [x["mail_id"] for x in a["messages"]] == [first, answer, thanks], start
    a = d.ok("mail", "thread", first)
    assert [x["body"] for x in a["messages"]] == ["what is 6x7?", "42", "thanks"]
    assert a["messages"][1]["in_reply_to"] == first
    # nothing was retired by looking at the thread
    assert all(x["state"] == "unread" for x in a["messages"])
    text = d.bench("mail", "thread", thanks)
    assert text.rc == 0 and text.out.index("what is 6x7?") < text.out.index("thanks")


def test_reply_goes_to_the_sender_with_re_subject_and_in_reply_to(shared):
    d = shared
    orig = d.ok("mail", "send", "operator", "-s", "status?", "-m", "how is it going")["mail_id"]
    a = d.ok("mail", "reply", orig, "-m", "fine")
    (sent,) = a["sent"]
    assert sent["to"] == "operator"
    got = d.ok("mail", "read", sent["mail_id"])
    assert got["subject"] == "Re: status?" and got["in_reply_to"] == orig
    # Re: is not doubled on a reply to a reply
    b = d.ok("mail", "reply", sent["mail_id"], "-m", "good")
    assert d.ok("mail", "read", b["sent"][0]["mail_id"])["subject"] == "Re: status?"


def test_reply_honours_reply_to(shared, who):
    d = shared
    orig = d.ok(
        "mail", "send", "operator", "-m", "job done", "--reply-to", "carol", "--reply-to", "dave"
    )["mail_id"]
    a = d.ok("mail", "reply", orig, "-m", "noted", "--key", f"{who}-ack")
    assert sorted(s["to"] for s in a["sent"]) == ["carol", "dave"]
    again = d.ok("mail", "reply", orig, "-m", "noted", "--key", f"{who}-ack")
    assert all(s["duplicate"] for s in again["sent"])


def test_a_session_threads_and_replies_only_within_its_own_mail(daemon, tmp_path):
    d = daemon
    to_alice = d.ok("mail", "send", "alice", "-s", "task", "-m", "do it")["mail_id"]
    to_bob = d.ok("mail", "send", "bob", "-m", "bob only")["mail_id"]
    rec = run_in_session(
        d,
        tmp_path,
        "alice",
        [
            {"verb": "mail/reply", "mail_id": to_alice, "body": "done", "token": "$TOKEN"},
            {"verb": "mail/reply", "mail_id": to_bob, "body": "sneaky", "token": "$TOKEN"},
            {"verb": "mail/thread", "mail_id": to_bob, "token": "$TOKEN"},
            {"verb": "mail/thread", "mail_id": to_alice, "token": "$TOKEN"},
        ],
    )
    ok, sneaky, bobs, own = rec["answers"]
    assert ok["ok"] is True and ok["sent"][0]["to"] == "operator", ok
    assert_refused(sneaky, "no-such-message")
    assert_refused(bobs, "no-such-message")
    assert [x["mail_id"] for x in own["messages"]] == [to_alice, ok["sent"][0]["mail_id"]]
    assert [x["from"] for x in own["messages"]] == ["operator", "alice"]


def test_thread_and_reply_bad_ids(shared):
    d = shared
    for verb in ("thread", "reply"):
        extra = ["-m", "x"] if verb == "reply" else []
        r = d.bench("mail", verb, "../../etc/passwd", *extra, "--json")
        assert_refused(r, "bad-id", rc=1)
        r = d.bench("mail", verb, "20261130T045611.123Z-0001", *extra, "--json")
        assert_refused(r, "no-such-message", rc=1)


def test_human_search_output_carries_no_control_characters(daemon):
    d = daemon
    d.ok("mail", "send", "alice", "-m", "hostile \x1b[2J\x1b]0;pwned\x07 payload here")
    r = d.bench("mail", "search", "payload")
    assert r.rc == 0 and "payload" in r.out, r
    assert "\x1b" not in r.out and "\x07" not in r.out
