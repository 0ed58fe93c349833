"""Who is speaking to the daemon: a session or the operator (derived, never claimed)."""

from typing import Any


class Caller:
    """Who is speaking: a session (by its secret or its pty) or the operator."""

    __slots__ = ("handle", "session")

    # `session` is a benchd.runtime Session, or None for the operator: Any, because the
    # pure core does not import the runtime.
    def __init__(self, handle: str, session: Any = None):
        self.handle = handle
        self.session = session

    @property
    def is_operator(self) -> bool:
        return self.session is None
