"""benchd.store.spares: empty files made ahead by a worker thread, on real files."""

import os

import trio

from benchd.store.spares import Spares


def _filled(spares: Spares) -> None:
    """What the keeper's worker thread does at a start (`Spares.run`), here in line."""
    assert spares._clear()
    made, refused = spares._make(0, spares.size)
    assert not refused
    spares.ready.extend(made)


def test_none_before_the_keeper_ran_then_each_spare_is_an_empty_private_file(tmp_path):
    spares = Spares(str(tmp_path / "spare"), size=8)
    assert spares.take() is None  # nothing made yet: the caller makes its own file
    _filled(spares)
    assert sorted(os.listdir(tmp_path / "spare")) == [str(i) for i in range(8)]
    taken = spares.take()
    assert taken is not None
    fd, path = taken
    try:
        os.write(fd, b"hello")
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        assert f.read() == b"hello"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path not in spares.ready and len(spares.ready) == 7


def test_a_start_removes_what_an_earlier_run_left(tmp_path):
    d = tmp_path / "spare"
    d.mkdir()
    (d / "old").write_bytes(b"")
    (d / "0").write_bytes(b"left by a crash")
    spares = Spares(str(d), size=4)
    _filled(spares)
    assert sorted(os.listdir(d)) == ["0", "1", "2", "3"]
    assert all(os.path.getsize(d / n) == 0 for n in os.listdir(d))


def test_a_spare_swapped_by_another_process_is_never_written(tmp_path):
    spares = Spares(str(tmp_path / "spare"), size=6)
    _filled(spares)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    a, b, c, e, f, keep = sorted(spares.ready)
    for p in (a, b, c, e, f):
        os.unlink(p)
    os.symlink(victim, a)  # a link: never followed
    os.link(victim, b)  # a second name of another file
    with open(c, "wb") as out:
        out.write(b"not empty")
    os.mkfifo(e)  # would block an open for writing
    fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)  # readable by others
    os.close(fd)
    spares.ready = [keep, a, b, c, e, f]  # the swapped ones are taken first
    taken = spares.take()
    assert taken is not None
    os.close(taken[0])
    assert taken[1] == keep  # each swapped one was passed over
    assert victim.read_bytes() == b"precious"
    with open(c, "rb") as f2:
        assert f2.read() == b"not empty"
    assert spares.take() is None  # none left: the caller makes its own


def test_a_spare_dir_that_is_a_link_is_not_used(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine").write_bytes(b"keep")
    os.symlink(elsewhere, tmp_path / "spare")
    spares = Spares(str(tmp_path / "spare"), size=4)

    async def main() -> None:
        with trio.fail_after(30):
            await spares.run()  # returns at once: nothing to keep

    trio.run(main)
    assert spares.ready == [] and spares.take() is None
    assert os.listdir(elsewhere) == ["mine"]
