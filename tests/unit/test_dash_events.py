"""The dashboard's pure parts that decide what an operator reads first: the events
pane's line layout, idle times from history, and the wait between reconnect attempts."""

import time

import pytest

from bench_cli.dash.model import RETRY_FIRST_S, RETRY_LAST_S, Board, retry_delay
from bench_cli.eventtext import event_line


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


LONG_ID = "20261201T165903.112Z-0001"


def test_an_event_line_names_its_parties_before_its_long_ids():
    sent = {
        "seq": 41,
        "ts": 1796036400000,
        "kind": "mail/sent",
        "mail_id": LONG_ID,
        "from": "bob",
        "to": "alice",
        "path": f"mail/alice/inbox/{LONG_ID}.md",
        "key": "k-" + "x" * 40,
        "live": True,
    }
    line = event_line(sent)
    assert line.startswith("41 11:00:00 mail/sent      bob -> alice  live=true mail_id=")
    assert line.index("mail_id=") < line.index("key=") < line.index("path=")
    woken = {
        "seq": 42,
        "ts": 1796036400000,
        "kind": "agent/woken",
        "session": "s1a2b3c4d",
        "handle": "carol",
        "mail_id": LONG_ID,
        "path": "mail/carol/read/y.md",
        "from": "bob",
        "digest": 7,
    }
    assert event_line(woken).startswith(
        "42 11:00:00 agent/woken    bob -> carol  digest=7 session="
    )
    spawned = {
        "seq": 43,
        "ts": 1796036400000,
        "kind": "session/spawned",
        "session": "s1",
        "handle": "alice",
        "pid": 9,
    }
    assert event_line(spawned) == "43 11:00:00 session/spawned alice  pid=9 session=s1"
    # no value, nothing shown; a reply through the outbox names its recipient
    posted = {"seq": 44, "ts": 1796036400000, "kind": "outbox/posted", "to": "op", "key": "k"}
    assert event_line(posted) == "44 11:00:00 outbox/posted  -> op  key=k"
    exited = {
        "seq": 45,
        "ts": 1796036400000,
        "kind": "session/exited",
        "handle": "a",
        "session": "s1",
        "pid": 3,
        "exit": 0,
        "signal": None,
    }
    assert "signal" not in event_line(exited)


def test_the_pane_bench_events_and_the_proof_trail_show_values_alike():
    # The pane used to print Python values: recovered=False, argv=['sleep', '600'].
    from bench_cli.eventtext import format_event
    from tools.proofs.common import timeline

    ev = {
        "seq": 7,
        "ts": 1796036400000,
        "kind": "session/spawned",
        "handle": "w1",
        "recovered": False,
        "job": True,
        "argv": ["sleep", "600"],
        "note": "two words",
        "signal": 1,
    }
    pane = event_line(ev)
    cli = "".join(format_event(ev))
    trail = timeline([dict(ev, kind="daemon/started")])
    for want in ("recovered=false", "job=true", "argv=sleep,600", 'note="two words"'):
        assert want in pane and want in cli and want in trail, want
    assert "signal=SIGHUP" in pane and "signal=SIGHUP" in cli
    assert "False" not in pane + trail and "[" not in pane + trail


def test_a_past_wake_leaves_the_snapshots_idle_time_alone():
    b = Board()
    row = {"session": "s1", "handle": "alice", "pid": 1, "state": "running"}
    b.load([dict(row, idle_ms=600_000)], {"alice": 0}, now=100.0)
    woken = {
        "seq": 1,
        "ts": 0,
        "kind": "agent/woken",
        "handle": "alice",
        "mail_id": "m",
        "session": "s1",
    }
    b.apply(woken, 100.5, count=False)  # history from before the snapshot
    assert b.rows["alice"].wake.startswith("woken")
    assert b.rows["alice"].idle_text(100.5) == "10m"
    b.apply(dict(woken, seq=2), 101.0)  # a wake now: idle from now
    assert b.rows["alice"].idle_text(103.0) == "2s"


def test_reconnect_attempts_back_off_to_a_few_seconds():
    delays = [retry_delay(n) for n in range(12)]
    assert delays[0] == RETRY_FIRST_S
    assert all(b == min(RETRY_LAST_S, 2 * a) for a, b in zip(delays, delays[1:], strict=False))
    assert delays[-1] == RETRY_LAST_S <= 5.0
    assert retry_delay(10_000) == RETRY_LAST_S  # no overflow after a night of retries
