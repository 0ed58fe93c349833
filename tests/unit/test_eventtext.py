"""`bench events` text: times as local times, milliseconds as durations, and fields
without a value (empty, or a kind's unset value) left out (issue 40's frictions)."""

import time

from bench_cli.eventtext import format_event

T = 1796647703318  # ms since the epoch


def _text(ev: dict) -> str:
    return "".join(str(p) for p in format_event(ev))


def test_a_would_deadlock_refusal_has_no_limit_and_no_empty_fields():
    ev = {"seq": 9, "ts": T, "kind": "wait/refused", "handle": "op", "code": "would-deadlock"}
    line = _text(dict(ev, cycle=["op", "op"], limit=0, refused=[], by=""))
    assert line.endswith(" handle=op code=would-deadlock cycle=op,op"), line
    # A too-many-waits refusal's limit is its own: kept.
    assert "limit=4" in _text(dict(ev, code="too-many-waits", limit=4))


def test_times_are_times_and_milliseconds_durations():
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(T / 1000)) + ".318"
    line = _text({"seq": 1, "ts": T, "kind": "wake/capped", "to": "bob", "until": T})
    assert line.endswith(f" to=bob until={stamp}"), line
    line = _text({"seq": 2, "ts": T, "kind": "job/deadline", "deadline_ms": T})
    assert f" deadline={stamp}" in line and "deadline_ms" not in line, line
    line = _text({"seq": 3, "ts": T, "kind": "job/stalled", "idle_ms": 600_000})
    assert line.endswith(" idle=10m"), line
