"""Exited sessions on disk: what `bench ps -a` and `bench tail` show after a restart.

When a session settles, its record (the fields of `bench ps --json`, with its job's
outcome and its spawner) and the last `--kept-scrollback` bytes of its output are
written to BENCH_DIR/sessions/<session id>/ (`info.json`, `output`), each staged,
fsynced and renamed, so a crash leaves either the old file or the new one. At start
the newest EXITED_KEPT (200) are loaded; older ones, and all of them at `bench ps
--prune`, are removed. Session ids are the daemon's own (`s` + 8 hex digits): no client
input names a path here.
"""

import json
import os
import re
import shutil
from typing import Any

from benchd.store.fileio import fsync_dir, replace_file

DIR = "sessions"
SID_RE = re.compile(r"s[0-9a-f]{8}")


class ExitedStore:
    def __init__(self, bench_dir: str, kept: int, scrollback_bytes: int):
        self.root = os.path.join(bench_dir, DIR)
        self.kept = kept
        self.scrollback_bytes = scrollback_bytes

    def _dir(self, sid: str) -> str:
        if SID_RE.fullmatch(sid) is None:
            raise ValueError(f"{sid!r} is not a session id")
        return os.path.join(self.root, sid)

    def save(self, sid: str, record: dict[str, Any], output: bytes) -> None:
        """Write one exited session (blocking: run it in a worker thread)."""
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        d = self._dir(sid)
        os.makedirs(d, mode=0o700, exist_ok=True)
        keep = output[-self.scrollback_bytes :] if self.scrollback_bytes else b""
        replace_file(os.path.join(d, "output"), keep)
        replace_file(os.path.join(d, "info.json"), json.dumps(record).encode())
        fsync_dir(d)
        fsync_dir(self.root)

    def load(self) -> list[tuple[dict[str, Any], bytes]]:
        """The newest `kept` exited sessions, oldest first; the rest are removed."""
        try:
            names = [n for n in os.listdir(self.root) if SID_RE.fullmatch(n)]
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            d = os.path.join(self.root, name)
            try:
                with open(os.path.join(d, "info.json"), "rb") as f:
                    record = json.loads(f.read())
                with open(os.path.join(d, "output"), "rb") as f:
                    output = f.read()
            except (OSError, ValueError):
                continue  # half written by a crash at save: skipped, removed with the old
            if not isinstance(record, dict) or record.get("session") != name:
                continue
            found.append((int(record.get("ended_ms") or 0), record, output))
        found.sort(key=lambda x: x[0])
        keep = found[-self.kept :] if self.kept else []
        kept_ids = {r["session"] for _, r, _ in keep}
        for name in names:
            if name not in kept_ids:
                self.remove(name)
        return [(r, out) for _, r, out in keep]

    def remove(self, sid: str) -> None:
        shutil.rmtree(self._dir(sid), ignore_errors=True)

    def prune(self) -> None:
        """Forget every exited session on disk (`bench ps --prune`)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            if SID_RE.fullmatch(name):
                self.remove(name)
