"""A session's lifecycle (benchd.core.agentstate): running -> exited passes, others raise."""

import pytest

from benchd.core.agentstate import IllegalTransition, SessionState, advance


def test_a_running_session_exits():
    assert advance(SessionState.RUNNING, SessionState.EXITED) is SessionState.EXITED


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (SessionState.EXITED, SessionState.RUNNING),
        (SessionState.EXITED, SessionState.EXITED),
        (SessionState.RUNNING, SessionState.RUNNING),
    ],
)
def test_other_moves_raise(current, new):
    with pytest.raises(IllegalTransition, match=f"{current} -> {new}"):
        advance(current, new)


def test_the_wire_sees_the_old_strings():
    assert SessionState.RUNNING == "running" and SessionState.EXITED.value == "exited"
