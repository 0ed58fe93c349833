"""journal.damage in the state dir: the journal damage found at starts, kept until the
operator acknowledges it (`bench status --ack`), so `bench status` shows it across
restarts. One JSON object per line, each a journal/damaged event as it was logged."""

import json
import os
from collections.abc import Sequence

from benchd.store.fileio import write_all

REPORT = "journal.damage"


def load(root: str) -> list[dict[str, object]]:
    try:
        with open(os.path.join(root, REPORT), "rb") as f:
            raw = f.read()
    except OSError:
        return []
    out: list[dict[str, object]] = []
    for line in raw.split(b"\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a torn line: the event log has it too
        if isinstance(obj, dict):
            out.append(obj)
    return out


def add(root: str, items: Sequence[object]) -> None:
    """Append items durably. Raises OSError (the event log and benchd.log still have
    them)."""
    data = b"".join(json.dumps(i, separators=(",", ":")).encode() + b"\n" for i in items)
    fd = os.open(os.path.join(root, REPORT), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def clear(root: str) -> None:
    try:
        os.unlink(os.path.join(root, REPORT))
    except FileNotFoundError:
        pass
