"""The daemon's log: what the runtime needs of it (`Log`: a structlog logger in the
daemon, any object with these methods in a test), and `setup`, which points structlog
at BENCH_DIR/benchd.log, one JSON object per line."""

import logging
from typing import Protocol

import structlog


class Log(Protocol):
    """Events by name, with their context as keywords (structlog's BoundLogger)."""

    def info(self, event: str, **kw: object) -> object: ...

    def warning(self, event: str, **kw: object) -> object: ...

    def error(self, event: str, **kw: object) -> object: ...

    def exception(self, event: str, **kw: object) -> object: ...


def setup(path: str) -> structlog.stdlib.BoundLogger:
    # A line the disk refuses (full) is dropped, never printed with a traceback.
    logging.raiseExceptions = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("benchd")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    log: structlog.stdlib.BoundLogger = structlog.get_logger("benchd")
    return log
