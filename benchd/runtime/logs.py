"""What the runtime needs of the daemon's log: a structlog logger (benchd.server.daemonlog)
in the daemon, any object with these methods in a test."""

from typing import Protocol


class Log(Protocol):
    """Events by name, with their context as keywords (structlog's BoundLogger)."""

    def info(self, event: str, **kw: object) -> object: ...

    def warning(self, event: str, **kw: object) -> object: ...

    def error(self, event: str, **kw: object) -> object: ...

    def exception(self, event: str, **kw: object) -> object: ...
