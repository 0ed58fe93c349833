"""The lifecycles of sessions and jobs, as enums with their legal moves.

A session runs from the moment its handle is held (its process may still be starting)
until its child exits; then it is exited for good. A job runs from its spawn until it
settles (completed, failed, cancelled, outcome_unknown) or is abandoned (its spawn
failed before the child ran); a settled job never settles again. Any other move is a
bug, and `advance` raises IllegalTransition rather than let it through.

The wire and the outbox keep their strings: a session's `state` in `bench ps --json`
is the enum's value, and the outbox's jobs.state column holds `running` or
`settled:<outcome>` (`column`).
"""

import enum
from typing import TypeVar


class IllegalTransition(Exception):
    """A lifecycle was asked to make a move it does not have."""


class SessionState(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"


class JobState(enum.StrEnum):
    RUNNING = "running"
    SETTLED = "settled"


S = TypeVar("S", "SessionState", "JobState")


# Keyed by (lifecycle, state): the two enums share values ("running"), so their
# members compare equal as strings.
MOVES: dict[tuple[type, str], frozenset[str]] = {
    (SessionState, SessionState.RUNNING): frozenset({SessionState.EXITED}),
    (SessionState, SessionState.EXITED): frozenset(),
    (JobState, JobState.RUNNING): frozenset({JobState.SETTLED}),
    (JobState, JobState.SETTLED): frozenset(),
}


def advance(current: S, new: S) -> S:
    """`new`, if the lifecycle may move there from `current`; else IllegalTransition."""
    if type(new) is not type(current) or new not in MOVES[type(current), current]:
        raise IllegalTransition(f"{type(current).__name__}: {current} -> {new} is not a move")
    return new


def column(state: JobState, outcome: str | None = None) -> str:
    """The outbox's jobs.state value: `running`, or `settled:<outcome>`."""
    if state is JobState.SETTLED:
        if not outcome:
            raise IllegalTransition("a settled job has an outcome")
        return f"{state}:{outcome}"
    return str(state)


def job_state(value: str) -> JobState:
    """The lifecycle state of an outbox jobs.state value."""
    return JobState(value.partition(":")[0])
