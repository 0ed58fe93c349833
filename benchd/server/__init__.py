"""The process: entry point, connections, handlers (see benchd/__init__.py)."""
