"""Who is speaking to the daemon: a session or the operator (derived, never claimed)."""

from typing import Protocol


class CallerSession(Protocol):
    """What is read of a calling session (a benchd.runtime.roster Session): a protocol,
    because the pure core does not import the runtime. Read-only, so the session's own
    mutable attributes satisfy it."""

    @property
    def id(self) -> str: ...

    @property
    def handle(self) -> str: ...

    @property
    def live(self) -> bool: ...

    @property
    def lineage(self) -> tuple[str, ...]: ...

    @property
    def job(self) -> object: ...


class Caller:
    """Who is speaking: a session (by its secret or its pty) or the operator."""

    __slots__ = ("handle", "session")

    def __init__(self, handle: str, session: CallerSession | None = None):
        self.handle = handle
        self.session = session

    @property
    def is_operator(self) -> bool:
        return self.session is None
