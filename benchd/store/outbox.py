"""The durable outbox: SQLite (WAL, synchronous=FULL) in BENCH_DIR/outbox.sqlite.

Durability per write: settlements (the replies owed and the job's settled mark) and new
jobs commit with synchronous=FULL, in one transaction each. The drain's own writes
(receipts, retry times) commit with synchronous=NORMAL: losing one to a power cut only
means a reply is posted again, and the mailroom recognises its key and writes nothing.
WAL keeps the order: a later FULL commit makes every earlier one durable too.

Why SQLite and not files: a settlement writes one row per replyTo address and marks
the job settled, and those must land together (a crash must not leave the job
settled with half its replies written, nor replies written for a job that will be
settled again with other content). One transaction gives that with a single fsync,
and `list(limit, after_key)` is an ordered index scan. synchronous=FULL because,
unlike the mail index, nothing else on disk can rebuild the rows a settlement writes.

Tables: `rows` (the fan-out core's outbox port: key -> value), `jobs` (a job per
session: the queued job's JSON, the content reported so far, whether it settled, its
deadline as a wall-clock time in ms, and its task mail's id and subject, which thread
the replies). Columns added since the first version are added to an older file when
it is opened (NULL there: no deadline, no thread).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from types import TracebackType
from typing import NamedTuple, Self

from benchd.core.states import JobState, advance, column, job_state
from benchd.store import sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs(
  session TEXT PRIMARY KEY, handle TEXT NOT NULL, job TEXT NOT NULL,
  content TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT 'running');
"""
# Columns newer than the table: (name, SQL type), added to an older file on open.
_ADDED = (("deadline_ms", "INTEGER"), ("task_id", "TEXT"), ("subject", "TEXT"))
_KEY = "json_extract(job, '$.payload.mail.key')"


class JobRow(NamedTuple):
    """A job as the jobs table holds it."""

    session: str
    handle: str
    job: dict[str, object]  # the fan-out core's job, as JSON (benchd.core.jobs decodes it)
    content: str  # what the session reported (bench report), "" if nothing
    state: str  # a JobState's column text
    deadline_ms: int | None = None  # wall-clock ms when it is ended, if it has a deadline


_COLUMNS = "session, handle, job, content, state, deadline_ms"


def _job_row(row: tuple[str, str, str, str, str, int | None]) -> JobRow:
    return JobRow(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])


class SqliteOutbox:
    """The Outbox port (put, read, ordered list) plus the jobs table."""

    def __init__(self, path: str) -> None:
        # Python's default wait for another program's lock (5 s): the outbox is written
        # rarely, off the hot path, and a settlement had better wait than fail.
        self.db = sqlite.connect(path, busy_ms=5000)
        self.db.executescript(_SCHEMA)
        have = {row[1] for row in self.db.execute("PRAGMA table_info(jobs)")}
        for name, kind in _ADDED:
            if name not in have:
                self.db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        # Replies find their task's thread by the task's key (and has_job_key asks too).
        self.db.execute(f"CREATE INDEX IF NOT EXISTS jobs_key ON jobs({_KEY})")

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------ the Outbox port

    def put(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO rows(key, value) VALUES (?, ?)", (key, value))

    def read(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM rows WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def list(self, limit: int, after_key: str | None) -> list[tuple[str, str]]:
        if after_key is None:
            q = self.db.execute("SELECT key, value FROM rows ORDER BY key LIMIT ?", (limit,))
        else:
            q = self.db.execute(
                "SELECT key, value FROM rows WHERE key > ? ORDER BY key LIMIT ?",
                (after_key, limit),
            )
        return q.fetchall()

    # ------------------------------------------------------------ transactions

    def __enter__(self) -> Self:
        """A durable transaction (synchronous=FULL): settlements, new jobs, reports."""
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.db.execute("PRAGMA synchronous=NORMAL")

    # ------------------------------------------------------------ jobs

    def add_job(
        self,
        session: str,
        handle: str,
        job: Mapping[str, object],
        deadline_ms: int | None = None,
    ) -> None:
        self.db.execute(
            "INSERT INTO jobs(session, handle, job, deadline_ms) VALUES (?, ?, ?, ?)",
            (session, handle, json.dumps(job), deadline_ms),
        )

    def set_task(self, session: str, task_id: str, subject: str) -> None:
        """The task mail as delivered: its id and subject (the replies' thread). Not a
        durable transaction of its own: the settlement's, later, makes it durable."""
        self.db.execute(
            "UPDATE jobs SET task_id=?, subject=? WHERE session=?", (task_id, subject, session)
        )

    def task_of(self, key: str) -> tuple[str | None, str | None]:
        """(task mail id, subject) of the job whose task has `key`; Nones when unknown."""
        row = self.db.execute(
            f"SELECT task_id, subject FROM jobs WHERE {_KEY} = ? LIMIT 1", (key,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def report(self, session: str, content: str) -> bool:
        cur = self.db.execute(
            "UPDATE jobs SET content=? WHERE session=? AND state=?",
            (content, session, column(JobState.RUNNING)),
        )
        return cur.rowcount > 0

    def job(self, session: str) -> JobRow | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE session=?", (session,)).fetchone()
        return None if row is None else _job_row(row)

    def has_job_key(self, key: str) -> bool:
        row = self.db.execute(f"SELECT 1 FROM jobs WHERE {_KEY} = ? LIMIT 1", (key,)).fetchone()
        return row is not None

    def running_jobs(self) -> builtins.list[JobRow]:  # `list` is a method here
        return [
            _job_row(row)
            for row in self.db.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE state=?",
                (column(JobState.RUNNING),),
            )
        ]

    def mark_settled(self, session: str, outcome: str) -> None:
        row = self.db.execute("SELECT state FROM jobs WHERE session=?", (session,)).fetchone()
        if row is not None:  # a settled job never settles again (IllegalTransition)
            advance(job_state(row[0]), JobState.SETTLED)
        self.db.execute(
            "UPDATE jobs SET state=? WHERE session=?",
            (column(JobState.SETTLED, outcome), session),
        )
