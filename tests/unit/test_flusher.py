"""benchd.store.fileio.Flusher: per-file flushes issued together, on real files."""

import os

import pytest

from benchd.store.fileio import Flusher


def test_flushes_files_dirs_and_fds_together(tmp_path):
    paths = []
    for i in range(20):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * 100)
        paths.append(str(p))
    fd = os.open(str(tmp_path / "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"line\n")
        f = Flusher()
        f.flush(moved=[(p, "") for p in paths], dirs={str(tmp_path)}, fds=[fd])  # no error
        f.flush(moved=[(paths[0], "")])  # one file: inline, no thread
        f.flush(moved=[(str(tmp_path / "gone"), paths[0])])  # moved meanwhile: the other
        f.flush(moved=[(str(tmp_path / "gone"), "")])  # gone from both: nothing of ours
    finally:
        os.close(fd)


def test_a_failed_flush_raises_after_the_others_are_done(tmp_path):
    good = tmp_path / "good"
    good.write_bytes(b"x")
    gone = str(tmp_path / "gone")
    with pytest.raises(FileNotFoundError):
        Flusher().flush(moved=[(str(good), "")], dirs={str(tmp_path), gone})
    with pytest.raises(FileNotFoundError):
        Flusher().flush(dirs=[gone])
