"""benchd.core.agentstate: an agent's state from its own hook reports (pure)."""

import pytest

from benchd.core import agentstate as a
from benchd.runtime.agenthost import reset_from_screen

T = 1_000_000


def test_a_turn():
    s = a.step(None, "start", {}, T)
    assert s.state == "idle" and a.may_type(s, T)
    s = a.step(s, "prompt", {"prompt": "hi"}, T + 1)
    assert s.state == "working" and not a.may_type(s, T + 1)
    assert a.step(s, "stop", {}, T + 2).state == "idle"


def test_blocked_keeps_tool_and_input_cut():
    s = a.step(None, "permission", {"tool_name": "Bash", "tool_input": {"command": "x" * 5000}}, T)
    assert s.state == "blocked" and s.tool == "Bash"
    assert s.input is not None and len(s.input) == a.INPUT_CHARS + 1
    assert a.answered(s, T + 1).state == "working"
    # A permission_prompt notification after the request keeps the tool it named.
    assert a.step(s, "notification", {"notification_type": "permission_prompt"}, T + 1) == s


def test_limited_until_reset_or_work():
    s = a.step(
        None,
        "stop-failure",
        {"error": "rate_limit", "rate_limits": {"five_hour": {"resets_at": 2000}}},
        T,
    )
    assert s.state == "limited" and s.until == 2_000_000
    assert a.step(s, "stop", {}, T + 1) == s  # the Stop after a StopFailure changes nothing
    assert not a.may_type(s, 1_999_999) and a.may_type(s, 2_000_000)
    assert a.step(s, "prompt", {}, T + 2).state == "working"
    other = a.step(None, "stop-failure", {"error": "server_error"}, T)
    assert other.state == "idle"


def test_exited_is_final_and_bad_reports_are_refused():
    s = a.step(None, "end", {}, T)
    assert a.step(s, "prompt", {}, T + 1) == s
    with pytest.raises(a.BadReport):
        a.step(None, "explode", {}, T)
    with pytest.raises(a.BadReport):
        a.payload_of("[1]")
    with pytest.raises(a.BadReport):
        a.payload_of("{nope")
    assert a.payload_of("") == {}


def test_unreported_agents_leave_it_to_the_screen():
    assert a.may_type(None, T)


def test_reset_read_off_the_screen():
    day = 86_400_000 * 20_000  # a midnight, UTC
    screen = "You've hit your session limit · resets 1:42pm (UTC)\n"
    assert reset_from_screen(screen, day) == day + (13 * 60 + 42) * 60_000
    # Already past today: tomorrow's.
    assert (
        reset_from_screen(screen, day + 14 * 3_600_000)
        == day + 86_400_000 + (13 * 60 + 42) * 60_000
    )
    assert reset_from_screen("resets 1:42pm (Europe/Paris)", day) is None
    assert reset_from_screen("nothing here", day) is None


def test_limit_reset_read_from_the_error_message():
    now = 1_795_996_800_000  # 2026-11-30T00:00:00Z
    at_042 = now + 42 * 60_000  # 00:42 UTC
    said = "429 You have hit your usage limit. It resets at 2026-11-30T00:42:00Z."
    s = a.step(None, "stop-failure", {"error": "rate_limit", "error_message": said}, now)
    assert s.state == "limited" and s.until == at_042
    # A resets_at in the report wins over the words.
    payload = {"error": "rate_limit", "resets_at": 1_795_996_900, "error_message": said}
    assert a.step(None, "stop-failure", payload, now).until == 1_795_996_900_000
    assert a.reset_in_text("Please try again in 6m0s.", now) == now + 360_000
    assert a.reset_in_text("rate limit: retry after 1.5 minutes", now) == now + 90_000
    assert a.reset_in_text("usage limit; resets at 1795996900", now) == 1_795_996_900_000
    assert a.reset_in_text("at 2026-11-30T01:42:00+01:00", now) == at_042
    # Not a time, in the past, or too far away: unknown (parked until it works again).
    assert a.reset_in_text("try again in 5 places", now) is None
    assert a.reset_in_text("resets at 2026-11-29T21:00:00Z", now) is None
    assert a.reset_in_text("resets at 2027-06-01T00:00:00Z", now) is None
    assert a.reset_in_text("usage limit reached", now) is None
    s = a.step(None, "stop-failure", {"error": "rate_limit", "error_message": 7}, now)
    assert s.state == "limited" and s.until is None


def test_codex_limit_reset_read_in_local_time_to_the_end_of_its_minute():
    import datetime

    from benchd.runtime.adapters import TURN_SCREEN
    from benchd.runtime.agenthost import local_reset

    marks = TURN_SCREEN["codex"]
    text = "You’ve hit your usage limit. Upgrade to Pro ... or try again at 5:22 PM."
    assert marks.limit.search(text)
    now = datetime.datetime(2026, 12, 7, 17, 0, 30).astimezone()
    at = local_reset(marks.reset.search(text), int(now.timestamp() * 1000))
    assert at == int(now.replace(minute=23, second=0).timestamp() * 1000)
    # Read a few minutes late: that minute, already past (a wake may go at once).
    late = now.replace(hour=17, minute=30)
    assert local_reset(marks.reset.search(text), int(late.timestamp() * 1000)) == at
    # Earlier in the day than now by hours: tomorrow's.
    night = now.replace(hour=23)
    tomorrow = local_reset(marks.reset.search(text), int(night.timestamp() * 1000))
    assert tomorrow is not None and tomorrow > int(night.timestamp() * 1000)
    assert local_reset(marks.reset.search("try again later"), 0) is None


def test_idle_by_its_start_alone_is_fresh_until_a_turn_ends():
    started = a.step(None, "start", {}, 1)
    assert started.state == "idle" and started.fresh  # typed behind the full idle gate
    working = a.step(started, "prompt", {}, 2)
    ended = a.step(working, "stop", {}, 3)
    assert ended.state == "idle" and not ended.fresh  # its word: the short settle
