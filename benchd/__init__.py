"""benchd: the bench daemon (mailroom, event log, sessions, wake reactor, job outbox)."""

__version__ = "0.1.0"
