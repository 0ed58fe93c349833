"""Jobs on disk: one JSON record per job (`benchd.core.jobs.JobRecord`) in jobs/open/,
moved to jobs/done/ once it owes nothing, written only by the committer like a message
(docs/jobs.md). `migrate` moves the outbox of versions up to f84c24b (`outbox.sqlite`: a
`jobs` table of camelCase JSON and a `rows` table of pending replies and receipts) into
records.
"""

import json
import os
import sqlite3
from typing import Any

import msgspec

from benchd.core.jobs import Job, JobRecord, Reply
from benchd.core.keys import job_key_of
from benchd.store.fileio import fsync_dir, replace_file
from benchd.store.statedir import read_regular

OLD = "outbox.sqlite"
MIGRATED = "outbox.sqlite.migrated"
_decode = msgspec.json.Decoder(JobRecord).decode
_encode = msgspec.json.Encoder().encode


def encode(record: JobRecord) -> bytes:
    return _encode(record) + b"\n"


class JobFiles:
    """The job records: the open ones in memory (as on disk), the done ones on disk."""

    def __init__(self, bench_dir: str) -> None:
        self.root = os.path.join(bench_dir, "jobs")
        for sub in ("open", "done", "tmp"):
            os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)
        for entry in os.scandir(self.dir("tmp")):  # staged, never committed
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)  # anything else is not ours: left alone
        self.open: dict[str, JobRecord] = {}  # session -> record
        self.keys: dict[str, str] = {}  # task key -> session, of the open records
        # session -> its record as the batch being committed leaves it (benchd.runtime.
        # jobhost.JobOp): the next change in the same batch starts from it
        self.staged: dict[str, JobRecord] = {}
        # (where, why) of jobs that do not load: said at start, left where they are
        self.bad: list[tuple[str, str]] = migrate(bench_dir, self)
        for name in sorted(os.listdir(self.dir("open"))):
            path = os.path.join(self.dir("open"), name)
            try:
                record = _decode(read_regular(path))
            except (OSError, msgspec.DecodeError) as err:
                self.bad.append((name, str(err)))  # left where it is, and said
                continue
            if name != f"{record.job.session}.json":
                self.bad.append((name, "its session is not its name"))
                continue
            self.remember(record)

    def dir(self, sub: str) -> str:
        return os.path.join(self.root, sub)

    def path(self, sub: str, session: str) -> str:
        return os.path.join(self.root, sub, f"{session}.json")

    def remember(self, record: JobRecord) -> None:
        """A record as committed: kept in memory while it owes something."""
        session = record.job.session
        if record.owing:
            self.open[session] = record
            self.keys[record.job.key] = session
        elif self.open.pop(session, None) is not None:
            self.keys.pop(record.job.key, None)

    def job(self, session: str) -> JobRecord | None:
        """A job's record, open or done; None when `session` ran no job."""
        record = self.open.get(session)
        if record is not None:
            return record
        try:
            return _decode(read_regular(self.path("done", session)))
        except (OSError, msgspec.DecodeError):
            return None

    def task_of(self, key: str) -> tuple[str | None, str | None]:
        """(task mail id, subject) of the open job whose task has `key`."""
        record = self.open.get(self.keys.get(key, ""))
        return (record.task_id, record.subject) if record else (None, None)

    def has_key(self, key: str) -> bool:
        return key in self.keys


# ---------------------------------------------------------------- the move from SQLite


def migrate(bench_dir: str, files: JobFiles) -> list[tuple[str, str]]:
    """Move `outbox.sqlite`'s jobs and owed replies into job records, before `files`
    reads open/; returns the (session, why) of job rows that do not load (or the file's
    own, when SQLite cannot read it: then it stays where it is)."""
    path = os.path.join(bench_dir, OLD)
    if not os.path.exists(path):
        return []
    try:
        db = sqlite3.connect(path)
        try:
            records, bad = _read_old(db)
        finally:
            db.close()  # the last connection: SQLite folds its WAL back and removes it
    except sqlite3.Error as err:
        # Damaged: the start goes on without it (said at every start, left in place).
        return [(OLD, f"the old outbox cannot be read: {err}")]
    written = False
    for record in records:
        session = record.job.session
        if any(os.path.exists(files.path(sub, session)) for sub in ("open", "done")):
            continue  # written by a start that crashed after it (or since): kept
        where = files.path("open" if record.owing else "done", session)
        replace_file(where, encode(record), files.path("tmp", session))
        written = True
    if written:
        fsync_dir(files.dir("open"))
        fsync_dir(files.dir("done"))
    os.rename(path, os.path.join(bench_dir, MIGRATED))
    fsync_dir(bench_dir)
    return bad


def _read_old(db: sqlite3.Connection) -> tuple[list[JobRecord], list[tuple[str, str]]]:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    rows: dict[str, list[tuple[int, dict[str, Any]]]] = {}  # task key -> (index, row)
    if "rows" in tables:
        for key, value in db.execute("SELECT key, value FROM rows ORDER BY key"):
            task_key, index = job_key_of(key), key.rpartition(":")[2]
            parsed = _json(value)
            if task_key is not None and index.isdecimal() and isinstance(parsed, dict):
                rows.setdefault(task_key, []).append((int(index), parsed))
    records: list[JobRecord] = []
    bad: list[tuple[str, str]] = []
    if "jobs" not in tables:
        return records, bad
    have = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    cols = ["session", "handle", "job", "content", "state"]
    cols += [c for c in ("deadline_ms", "task_id", "subject") if c in have]
    for values in db.execute(f"SELECT {', '.join(cols)} FROM jobs ORDER BY session"):
        row = dict(zip(cols, values, strict=True))
        try:
            records.append(_old_job(row, rows))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            bad.append((str(row["session"]), f"{type(err).__name__}: {err}"))
    return records, bad


def _json(text: object) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _old_job(row: dict[str, Any], rows: dict[str, list[tuple[int, dict[str, Any]]]]) -> JobRecord:
    """One row of the old jobs table (its job in camelCase JSON) and its reply rows."""
    payload = _json(row["job"])["payload"]
    mail = payload["mail"]
    session = payload["sessionId"]
    if not isinstance(session, str) or session != row["session"] or not isinstance(mail, dict):
        raise ValueError("the job's payload does not name its session and task mail")
    reply_to = tuple(str(a["agentId"]) for a in mail["replyTo"])
    job = Job(
        session=session,
        handle=str(row["handle"]),
        key=str(mail["key"]),
        sender=str(mail["from"]["agentId"]),
        reply_to=reply_to,
        deadline_ms=row.get("deadline_ms"),
    )
    state = str(row["state"])
    outcome = state.partition(":")[2] if state.startswith("settled") else None
    if outcome == "outcome_unknown":
        outcome = "interrupted"  # an earlier version's word for it
    replies, body = [], ""
    # A settled job's reply rows, by index (a running job's are none of its own).
    owed = sorted(rows.get(job.key, []), key=lambda r: r[0]) if outcome is not None else []
    for index, value in owed:
        if "receipt" in value:
            replies.append(Reply(index=index, to=reply_to[index], delivered=True))
            continue
        reply_mail = value["mail"]
        body = body or str(reply_mail["content"])
        replies.append(
            Reply(
                index=index,
                to=str(reply_mail["to"]["agentId"]),
                attempts=int(value["attempts"]),
                due=int(value["due"]),
            )
        )
    return JobRecord(
        job=job,
        content=str(row["content"] or ""),
        task_id=row.get("task_id"),
        subject=row.get("subject"),
        outcome=outcome,
        body=body,
        replies=tuple(replies),
    )
