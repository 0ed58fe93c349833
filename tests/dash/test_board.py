"""The board (bench_cli.dash.model) when a handle changes hands (issue 40, defects 3
and 4): a session's job, outcome and place belong to its session id, never to a later
session of the same handle; a mailbox's unread count read from the daemon is exact at a
seq, and no event is counted twice or undone around it. Pure: no daemon."""

from bench_cli.dash.model import Board


def _row(sid, handle, state="running", **more):
    return {"session": sid, "handle": handle, "pid": 1, "state": state, "idle_ms": 0, **more}


def test_an_earlier_sessions_job_is_not_drawn_on_the_live_one():
    b = Board()
    b.load([_row("s1", "carol", "exited", job=True), _row("s2", "carol")], {}, now=0.0)
    assert b.rows["carol"].session == "s2" and not b.rows["carol"].job
    settled = {
        "seq": 1,
        "ts": 0,
        "kind": "job/settled",
        "session": "s1",
        "handle": "carol",
        "key": "k",
        "outcome": "interrupted",
        "replies": 1,
    }
    b.apply(settled, 1.0, count=False)  # the earlier carol's job, in the recent past
    b.apply(dict(settled, seq=2), 1.0)  # and settled now (a late settle)
    assert b.rows["carol"].outcome == "" and b.rows["carol"].job_text() == ""
    stalled = {"seq": 3, "ts": 0, "kind": "job/stalled", "session": "s1", "handle": "carol"}
    b.apply({**stalled, "idle_ms": 1}, 1.0)
    assert not b.rows["carol"].stalled
    # The live carol's own job settling is shown.
    b.apply(dict(settled, seq=4, session="s2", outcome="completed"), 1.0)
    assert b.rows["carol"].outcome == "completed"


def test_jobs_of_an_earlier_session_are_not_nested_under_the_new_one():
    b = Board()
    old_child = _row("s3", "alice.1", "exited", job=True, parent="s1", parent_handle="alice")
    b.load([_row("s1", "alice", "exited"), _row("s9", "alice"), old_child], {}, now=0.0)
    assert b.nested() == [("alice", 0), ("alice.1", 0)]
    # The new alice's own child is nested under it.
    b.apply(
        {
            "seq": 1,
            "ts": 0,
            "kind": "session/spawned",
            "session": "s10",
            "handle": "alice.2",
            "pid": 2,
            "job": True,
        },
        1.0,
    )
    b.apply(
        {
            "seq": 2,
            "ts": 0,
            "kind": "job/delegated",
            "parent": "s9",
            "parent_handle": "alice",
            "child": "s10",
            "child_handle": "alice.2",
            "reply_to": ["alice"],
            "depth": 1,
        },
        1.0,
    )
    assert b.nested() == [("alice", 0), ("alice.2", 1), ("alice.1", 0)]
    # A delegation naming the earlier alice places nothing under the new one.
    b.apply(
        {
            "seq": 3,
            "ts": 0,
            "kind": "session/spawned",
            "session": "s11",
            "handle": "alice.3",
            "pid": 3,
            "job": True,
        },
        1.0,
    )
    b.apply(
        {
            "seq": 4,
            "ts": 0,
            "kind": "job/delegated",
            "parent": "s1",
            "parent_handle": "alice",
            "child": "s11",
            "child_handle": "alice.3",
            "reply_to": ["alice"],
            "depth": 1,
        },
        1.0,
    )
    assert ("alice.3", 0) in b.nested()


def test_events_already_in_a_snapshots_count_are_not_counted_again():
    # A reconnect: the stream resumes at the board's last seq (5) while the snapshot's
    # count was read at seq 8, so events 6-8 are in it already.
    b = Board()
    b.last_seq = 5
    b.load([_row("s1", "alice")], {"alice": 3}, now=0.0, seq=8)
    for seq, kind in ((6, "mail/sent"), (7, "mail/sent"), (8, "mail/read")):
        b.apply({"seq": seq, "ts": 0, "kind": kind, "to": "alice", "handle": "alice"}, 1.0)
    assert b.rows["alice"].unread == 3
    b.apply({"seq": 9, "ts": 0, "kind": "mail/sent", "to": "alice"}, 1.0)
    assert b.rows["alice"].unread == 4


def test_a_count_that_crossed_an_event_does_not_undo_it():
    b = Board()
    b.load([_row("s1", "alice")], {"alice": 2}, now=0.0, seq=10)
    b.apply({"seq": 11, "ts": 0, "kind": "mail/sent", "to": "alice"}, 1.0)
    assert b.rows["alice"].unread == 3
    # A re-read answered from seq 10 (before the send): refused, the send stays counted.
    assert not b.set_unread("alice", 2, 10)
    assert b.rows["alice"].unread == 3
    # One read at seq 12 is taken, and the event at 12, arriving after it, is not added.
    assert b.set_unread("alice", 4, 12)
    b.apply({"seq": 12, "ts": 0, "kind": "mail/sent", "to": "alice"}, 1.0)
    assert b.rows["alice"].unread == 4


def test_a_new_session_of_a_handle_keeps_the_mailboxs_count():
    b = Board()
    b.load([_row("s1", "alice")], {"alice": 1}, now=0.0, seq=1)
    b.apply(
        {"seq": 2, "ts": 0, "kind": "session/exited", "session": "s1", "handle": "alice", "pid": 1},
        1.0,
    )
    b.apply({"seq": 3, "ts": 0, "kind": "mail/sent", "to": "alice"}, 1.0)
    b.apply(
        {
            "seq": 4,
            "ts": 0,
            "kind": "session/spawned",
            "session": "s2",
            "handle": "alice",
            "pid": 2,
        },
        1.0,
    )
    b.apply({"seq": 5, "ts": 0, "kind": "mail/sent", "to": "alice"}, 1.0)
    assert b.rows["alice"].session == "s2" and b.rows["alice"].unread == 3
    # A digest retires nothing; a wake of the mail does.
    woken = {"seq": 6, "ts": 0, "kind": "agent/woken", "session": "s2", "handle": "alice"}
    b.apply({**woken, "mail_id": None, "digest": 3}, 1.0)
    assert b.rows["alice"].unread == 3 and b.rows["alice"].wake.startswith("woken")
    b.apply({**woken, "seq": 7, "mail_id": "m1"}, 1.0)
    assert b.rows["alice"].unread == 2
