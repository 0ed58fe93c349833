"""The running parts, on trio: committer, mailroom, sessions, reactor (see benchd/__init__.py)."""
