"""Who is speaking to the daemon: a session or the operator (derived, never claimed)."""


class Caller:
    """Who is speaking: a session (by its secret or its pty) or the operator."""

    __slots__ = ("handle", "session")

    def __init__(self, handle: str, session=None):
        self.handle = handle
        self.session = session

    @property
    def is_operator(self) -> bool:
        return self.session is None
