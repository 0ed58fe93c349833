"""What lives on disk: event log, index, job records, recovery (see benchd/__init__.py)."""
