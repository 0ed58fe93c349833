"""A job's ending in one vocabulary: the words, how old records read, and the dashboard's
and `bench ps`'s view of stalls and deadlines (pure parts)."""

import pytest

from bench_cli.commands.ps import job_state
from bench_cli.dash.model import Board
from bench_cli.output import parse_duration
from bench_wire.messages import OUTCOMES, REASONS, current_outcome, upgrade_event
from benchd.core.jobs import Outcome, reply_outcome
from benchd.runtime.jobhost import outcome_of


def test_the_core_speaks_the_wire_vocabulary():
    """Every outcome a reply can say is one of the words bench_wire documents."""
    said = {reply_outcome(o) for o in Outcome} - {None}
    assert said <= set(OUTCOMES) and "cancelled" in OUTCOMES


@pytest.mark.parametrize(
    "cancelled,deadline,killed_by,exit_code,want",
    [
        (True, True, "alice", 0, ("cancelled", None)),
        (False, True, "alice", None, ("interrupted", "deadline")),
        (False, False, "benchd", 0, ("interrupted", "daemon-stopped")),
        (False, False, "alice", 0, ("interrupted", "killed")),
        (False, False, None, 0, ("completed", None)),
        (False, False, None, 3, ("failed", "exit-code")),
        (False, False, None, None, ("failed", "signal")),
    ],
)
def test_outcome_of_a_session(cancelled, deadline, killed_by, exit_code, want):
    outcome, reason = outcome_of(cancelled, deadline, killed_by, exit_code)
    assert (str(outcome), reason) == want
    assert reason is None or reason in REASONS


def test_old_words_read_in_todays():
    assert current_outcome("outcome_unknown") == ("interrupted", "daemon-stopped")
    assert current_outcome("failed", "exit-code") == ("failed", "exit-code")
    assert current_outcome(None) == (None, None)
    old = {"seq": 3, "kind": "job/settled", "outcome": "outcome_unknown", "replies": 1}
    assert upgrade_event(old) == dict(old, outcome="interrupted", reason="daemon-stopped")
    other = {"seq": 4, "kind": "mail/sent", "outcome": "outcome_unknown"}
    assert upgrade_event(other) is other
    assert job_state({"job": True, "state": "exited", "outcome": "outcome_unknown"}) == (
        "interrupted"
    )


def test_ps_job_state_shows_a_stall():
    assert job_state({"job": True, "state": "running", "stalled": True}) == "stalled"
    assert job_state({"job": True, "state": "running"}) == "running"
    assert job_state({"job": False, "state": "running", "stalled": True}) == "-"


def test_the_dashboard_follows_stalls_and_shows_the_time_left():
    b = Board()
    row = {
        "session": "s1",
        "handle": "kid",
        "pid": 1,
        "state": "running",
        "idle_ms": 0,
        "job": True,
        "reply_to": ["alice"],
        "deadline_left_ms": 600_000,
    }
    b.load([row], {}, now=100.0)
    r = b.rows["kid"]
    assert r.job_text() == "job->alice" and r.left_text(160.0) == "left 9m"
    b.apply({"seq": 1, "ts": 0, "kind": "job/stalled", "session": "s1", "handle": "kid"}, 101)
    assert r.job_text() == "job->alice stalled"
    b.apply({"seq": 2, "ts": 0, "kind": "job/active", "session": "s1", "handle": "kid"}, 102)
    assert r.job_text() == "job->alice"
    b.apply({"seq": 3, "ts": 0, "kind": "job/stalled", "session": "s1", "handle": "kid"}, 103)
    settled = {"seq": 4, "ts": 0, "kind": "job/settled", "session": "s1", "handle": "kid"}
    b.apply(dict(settled, outcome="outcome_unknown"), 104)
    assert r.job_text() == "job->alice interrupted"


@pytest.mark.parametrize(
    "text,seconds", [("90s", 90), ("10m", 600), ("1.5h", 5400), ("2d", 172800), (" 0s ", 0)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "-5m", "1w", "nanm", "infs", "1e400s"])
def test_bad_durations_say_what_a_duration_is(text):
    with pytest.raises(ValueError, match="is not a duration: give a number and a unit"):
        parse_duration(text)
