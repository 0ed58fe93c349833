"""The job outbox an earlier version kept in SQLite, moved into the job records at the
first start (benchd.store.outbox.migrate).

tests/fixtures/outbox_f84c24b/outbox.sqlite was written by f84c24b's own code (its
make.py says how, and what it holds): running jobs, one past its deadline, a settled
job with one reply delivered and one refused, settled jobs that owe nothing, and a row
that is not a job. Nothing here builds the old format from the current code.
"""

import os
import shutil

import pytest

from benchd.core.jobs import Reply
from benchd.store import outbox
from benchd.store.outbox import MIGRATED, OLD, JobFiles

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "outbox_f84c24b", OLD)
T0 = 1_796_199_050_000


def state(tmp_path) -> str:
    shutil.copy(FIXTURE, tmp_path / OLD)
    return str(tmp_path)


def snapshot(root: str) -> dict[str, bytes]:
    out = {}
    for sub in ("open", "done"):
        for name in sorted(os.listdir(os.path.join(root, "jobs", sub))):
            with open(os.path.join(root, "jobs", sub, name), "rb") as f:
                out[f"{sub}/{name}"] = f.read()
    return out


def test_the_old_outbox_becomes_job_records(tmp_path):
    files = JobFiles(state(tmp_path))
    assert sorted(files.open) == ["s-owed", "s-past", "s-run"]  # running, or owing
    run = files.open["s-run"]
    assert run.running and run.content == "halfway there"
    assert (run.job.handle, run.job.key, run.job.sender, run.job.reply_to) == (
        "child",
        "task-run",
        "operator",
        ("parent",),
    )
    assert (run.task_id, run.subject) == ("20261202T081050.000Z-0001", "subject of task-run")
    assert files.open["s-past"].job.deadline_ms == T0 - 60_000
    owed = files.open["s-owed"]
    assert owed.outcome == "completed"
    assert owed.replies == (
        Reply(index=0, to="parent", delivered=True),
        Reply(index=1, to="ghost", attempts=1, due=T0 + 100 + 1000),
    )
    # The body the old version wrote for the reply still owed, byte for byte.
    assert owed.body == (
        "---\noutcome: completed\nagentId: owed\nsessionId: s-owed\nended: exited\n"
        "exitCode: 0\n---\n\nreport of s-owed"
    )
    assert files.task_of("task-run") == ("20261202T081050.000Z-0001", "subject of task-run")
    done = files.job("s-done")
    assert done is not None and done.outcome == "failed" and not done.owing
    quiet = files.job("s-quiet")
    assert quiet is not None and quiet.outcome == "cancelled" and quiet.replies == ()
    # The row that is not a job: said, and left behind in the migrated file.
    assert [where for where, _why in files.bad] == ["s-bad"]
    assert not os.path.exists(tmp_path / OLD) and os.path.exists(tmp_path / MIGRATED)
    assert files.job("s-bad") is None


def test_a_second_start_moves_nothing_again(tmp_path):
    root = state(tmp_path)
    JobFiles(root)
    first = snapshot(root)
    again = JobFiles(root)
    assert snapshot(root) == first and again.bad == []  # the old file is not read again


@pytest.mark.parametrize("renames", [0, 1, 3, 5])
def test_a_crash_mid_migration_ends_as_a_clean_one(tmp_path, monkeypatch, renames):
    """A start killed after `renames` of its renames (each record's, then the old file's)
    leaves the old file in place; the next start ends exactly as one that never crashed."""
    clean = tmp_path / "clean"
    clean.mkdir()
    JobFiles(state(clean))
    want = snapshot(str(clean))

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    root = state(crashed)
    real_rename, done = os.rename, []

    def rename(src, dst):
        if len(done) == renames:
            raise KeyboardInterrupt("killed")  # the process dies here
        done.append(dst)
        real_rename(src, dst)

    monkeypatch.setattr(outbox.os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        JobFiles(root)
    monkeypatch.setattr(outbox.os, "rename", real_rename)
    assert os.path.exists(os.path.join(root, OLD))  # not moved until every record is
    files = JobFiles(root)
    assert snapshot(root) == want
    assert sorted(files.open) == ["s-owed", "s-past", "s-run"]
    assert os.listdir(os.path.join(root, "jobs", "tmp")) == []


def test_a_record_written_since_is_never_overwritten_by_the_old_file(tmp_path):
    """Should outbox.sqlite come back (copied in by hand), what the records say since
    wins: the move writes only records that do not exist."""
    root = state(tmp_path)
    files = JobFiles(root)
    path = files.path("open", "s-run")
    with open(path, "rb") as f:
        before = f.read()
    newer = before.replace(b"halfway there", b"all done")
    with open(path, "wb") as f:
        f.write(newer)
    shutil.copy(FIXTURE, tmp_path / OLD)
    assert JobFiles(root).open["s-run"].content == "all done"


def test_an_old_outbox_sqlite_cannot_read_is_said_and_left(tmp_path):
    (tmp_path / OLD).write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    files = JobFiles(str(tmp_path))
    ((where, why),) = files.bad
    assert where == OLD and "cannot be read" in why
    assert (tmp_path / OLD).exists() and files.open == {}
