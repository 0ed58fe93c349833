"""The session and job lifecycles (benchd.core.states): legal moves pass, others raise."""

import pytest

from benchd.core.states import (
    IllegalTransition,
    JobState,
    SessionState,
    advance,
    column,
    job_state,
)


def test_a_running_session_exits():
    assert advance(SessionState.RUNNING, SessionState.EXITED) is SessionState.EXITED


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (SessionState.EXITED, SessionState.RUNNING),
        (SessionState.EXITED, SessionState.EXITED),
        (SessionState.RUNNING, SessionState.RUNNING),
        (JobState.SETTLED, JobState.SETTLED),
        (JobState.SETTLED, JobState.RUNNING),
        (JobState.RUNNING, JobState.RUNNING),
    ],
)
def test_other_moves_raise(current, new):
    with pytest.raises(IllegalTransition, match=f"{current} -> {new}"):
        advance(current, new)


def test_a_running_job_settles():
    assert advance(JobState.RUNNING, JobState.SETTLED) is JobState.SETTLED


def test_the_outbox_column_keeps_its_strings():
    assert column(JobState.RUNNING) == "running"
    assert column(JobState.SETTLED, "completed") == "settled:completed"
    assert job_state("settled:abandoned") is JobState.SETTLED
    assert job_state("running") is JobState.RUNNING
    with pytest.raises(IllegalTransition):
        column(JobState.SETTLED)


def test_the_wire_sees_the_old_strings():
    assert SessionState.RUNNING == "running" and SessionState.EXITED.value == "exited"
