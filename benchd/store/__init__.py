"""What lives on disk: event log, index, outbox, recovery (see benchd/__init__.py)."""
