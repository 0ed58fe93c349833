"""Pure logic: no I/O, no trio (see benchd/__init__.py for the layers)."""
