"""The dashboard's pure parts: the board kept from events, threads, colours; search terms."""

import pytest

from bench_cli.commands.mail import since_arg
from bench_cli.dash.model import Board, threads
from bench_wire.untrusted import mask
from benchd.store.search import BadQuery, match_expr


def sessions():
    return [
        {"session": "s1", "handle": "alice", "pid": 1, "state": "running", "idle_ms": 500},
        {"session": "s0", "handle": "bob", "pid": 2, "state": "exited", "idle_ms": None, "exit": 3},
    ]


def test_board_counts_follow_events():
    b = Board()
    b.load(sessions(), {"alice": 2, "bob": 0}, now=10.0)
    assert b.rows["alice"].unread == 2 and b.rows["bob"].exit_text() == "exit 3"
    assert b.apply({"seq": 1, "ts": 0, "kind": "mail/sent", "to": "alice"}, 11.0)
    assert b.rows["alice"].unread == 3
    b.apply(
        {
            "seq": 2,
            "ts": 0,
            "kind": "agent/woken",
            "handle": "alice",
            "mail_id": "x",
            "session": "s1",
        },
        12.0,
    )
    assert b.rows["alice"].unread == 2 and b.rows["alice"].wake.startswith("woken")
    assert b.rows["alice"].idle_text(13.0) == "1s"
    b.apply({"seq": 3, "ts": 0, "kind": "mail/read", "handle": "alice"}, 12.0)
    b.apply({"seq": 4, "ts": 0, "kind": "wake/capped", "handle": "alice", "session": "s1"}, 12.0)
    assert b.rows["alice"].unread == 1 and b.rows["alice"].wake.startswith("capped")
    # a replayed event (seq already seen) changes nothing
    assert not b.apply({"seq": 1, "ts": 0, "kind": "mail/sent", "to": "alice"}, 13.0)
    assert b.rows["alice"].unread == 1
    b.apply(
        {
            "seq": 5,
            "ts": 0,
            "kind": "session/exited",
            "session": "s1",
            "handle": "alice",
            "exit": None,
            "signal": 15,
        },
        14.0,
    )
    assert b.rows["alice"].exit_text() == "SIGTERM"
    b.apply(
        {
            "seq": 6,
            "ts": 0,
            "kind": "session/spawned",
            "session": "s9",
            "handle": "bob",
            "pid": 9,
            "argv": ["x"],
            "job": True,
        },
        15.0,
    )
    b.apply(
        {
            "seq": 7,
            "ts": 0,
            "kind": "job/settled",
            "session": "s9",
            "handle": "bob",
            "key": "k",
            "outcome": "completed",
            "replies": 1,
        },
        16.0,
    )
    assert b.rows["bob"].state == "running" and b.rows["bob"].outcome == "completed"
    b.rows["bob"].reply_to = ["alice", "carol"]
    assert b.rows["bob"].job_text() == "job->alice,carol completed"
    assert b.rows["alice"].job_text() == ""


def test_history_before_the_snapshot_does_not_count_twice():
    b = Board()
    b.load(sessions(), {"alice": 2}, now=0.0)
    b.apply({"seq": 1, "ts": 0, "kind": "mail/sent", "to": "alice"}, 0.0, count=False)
    b.apply(
        {
            "seq": 2,
            "ts": 0,
            "kind": "agent/woken",
            "handle": "alice",
            "mail_id": "x",
            "session": "s1",
        },
        0.0,
        count=False,
    )
    assert b.rows["alice"].unread == 2 and b.rows["alice"].wake.startswith("woken")
    assert [e["seq"] for e in b.filtered("mail/")] == [1]
    assert [e["seq"] for e in b.filtered(handle="alice")] == [1, 2]


def test_threads_nest_replies_under_their_parents():
    msgs = [
        {"mail_id": "3", "in_reply_to": "1"},
        {"mail_id": "1", "in_reply_to": None},
        {"mail_id": "2", "in_reply_to": "elsewhere"},
        {"mail_id": "4", "in_reply_to": "3"},
        {"mail_id": "5", "in_reply_to": "6"},
        {"mail_id": "6", "in_reply_to": "5"},
    ]
    out = [(depth, m["mail_id"]) for depth, m in threads(msgs)]
    assert out[:4] == [(0, "1"), (1, "3"), (2, "4"), (0, "2")]
    assert sorted(m for _, m in out) == ["1", "2", "3", "4", "5", "6"]  # a cycle still shows


def test_match_expr_quotes_words_and_keeps_prefixes():
    assert match_expr("fix-up a.b") == '"fix-up" AND "a.b"'
    assert match_expr('dep* say "hi"') == '"dep"* AND "say" AND """hi"""'
    for bad in ("", "   ", "* **"):
        with pytest.raises(BadQuery):
            match_expr(bad)


def test_since_arg_ages_and_times():
    assert since_arg("90s", now=1000.0) == "1970-01-01T00:15:10.000Z"
    assert since_arg("2h", now=7200.0) == "1970-01-01T00:00:00.000Z"
    assert since_arg("2026-11-30T04:56Z") == "2026-11-30T04:56Z"  # the daemon checks it
    assert since_arg(None) is None


def test_daemon_since_accepts_utc_times_and_refuses_the_rest():
    from bench_wire.errors import WireError
    from benchd.server.handlers.mail import _since

    assert _since("2026-11-30T04:56Z") == "2026-11-30T04:56:00.000Z"
    assert _since("2026-11-30") == "2026-11-30T00:00:00.000Z"
    assert _since("2026-11-30T04:56:11.5Z") == "2026-11-30T04:56:11.500Z"
    for bad in ("yesterday", "2026-13-01", "2026-11-30T04:56:11.xZ"):
        with pytest.raises(WireError) as err:
            _since(bad)
        assert err.value.code == "bad-since"


def test_mask_keeps_text_and_hides_control_characters():
    # What the dashboard shows of mail, the log and screens goes through mask.
    assert mask("a\tb\nc é") == "a\tb\nc é"
    assert mask("x\x1b[2Jy\x07\x9b") == "x\ufffd[2Jy\ufffd\ufffd"


def test_board_nests_delegated_jobs_under_their_spawner():
    b = Board()
    rows = [
        {"session": "s1", "handle": "alice", "pid": 1, "state": "running", "idle_ms": 0},
        {"session": "s2", "handle": "zed", "pid": 2, "state": "running", "idle_ms": 0},
        {
            "session": "s3",
            "handle": "alice.1",
            "pid": 3,
            "state": "running",
            "idle_ms": 0,
            "job": True,
            "parent": "s1",
            "parent_handle": "alice",
        },
    ]
    b.load(rows, {}, now=0.0)
    assert b.nested() == [("alice", 0), ("alice.1", 1), ("zed", 0)]
    # A child spawned later is placed by its job/delegated event.
    spawned = {"seq": 1, "ts": 0, "kind": "session/spawned", "session": "s4", "pid": 4}
    b.apply({**spawned, "handle": "alice.1.1", "job": True}, 1.0)
    assert b.nested()[-2:] == [("alice.1.1", 0), ("zed", 0)]
    delegated = {
        "seq": 2,
        "ts": 0,
        "kind": "job/delegated",
        "parent": "s3",
        "parent_handle": "alice.1",
        "child": "s4",
        "child_handle": "alice.1.1",
        "reply_to": ["alice.1"],
        "depth": 2,
    }
    assert b.apply(delegated, 1.0)
    assert b.nested() == [("alice", 0), ("alice.1", 1), ("alice.1.1", 2), ("zed", 0)]
    assert b.rows["alice.1.1"].reply_to == ["alice.1"]


def test_a_running_agents_own_state_shows_in_the_state_column():
    b = Board()
    rows = sessions()
    rows[0]["agent"] = {"adapter": "claude", "state": "idle"}
    b.load(rows, {}, now=1.0)
    assert b.rows["alice"].exit_text() == "idle"
    ev = {"seq": 1, "ts": 0, "kind": "agent/state", "session": "s1", "handle": "alice"}
    assert b.apply(dict(ev, state="blocked", tool="Bash\x1b[2J"), 2.0)
    shown = b.rows["alice"].exit_text()
    assert shown.startswith("blocked Bash") and "\x1b" not in shown  # masked
    b.apply(dict(ev, seq=2, state="limited"), 3.0)
    assert b.rows["alice"].exit_text() == "limited"
    # Exited: the session's own end wins.
    b.apply(
        {
            "seq": 3,
            "ts": 0,
            "kind": "session/exited",
            "session": "s1",
            "handle": "alice",
            "exit": 0,
        },
        4.0,
    )
    assert b.rows["alice"].exit_text() == "exit 0"
    assert b.rows["bob"].exit_text() == "exit 3"  # no adapter: as before
