"""Spare files: sends write into empty files made ahead of need (BENCH_DIR/spare/).

A spare left written by a crash is emptied before use, a spare replaced by a link is
never written through, an empty pool falls back to the mailbox's tmp/, and the pool can
be switched off. Real daemons, real files.
"""

import os

from benchd.store import spares
from tests.conftest import wait_for


def spare_files(bench_dir: str) -> list[str]:
    d = os.path.join(bench_dir, "spare")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_make_and_adopt_keep_only_our_empty_regular_files(tmp_path):
    d = str(tmp_path / "spare")
    made = spares.make(d, 5)
    assert len(made) == 5 and all(os.path.getsize(p) == 0 for p in made)
    assert all(oct(os.stat(p).st_mode & 0o777) == "0o600" for p in made)
    with open(made[0], "wb") as f:
        f.write(b"a message a crash left here")
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(d, "link"))
    os.mkdir(os.path.join(d, "subdir"))
    os.link(made[1], str(tmp_path / "second-name"))  # two names: not ours alone
    adopted = spares.adopt(d)
    assert sorted(adopted) == sorted(p for p in made if p != made[1])
    assert os.path.getsize(made[0]) == 0
    assert spares.adopt(str(tmp_path / "missing")) == []


def test_sends_take_spares_and_the_pool_is_refilled(make_daemon):
    d = make_daemon("--spare-files", "8")
    wait_for(lambda: len(spare_files(d.dir)) == 8, what="the pool filled")
    inodes = {os.stat(os.path.join(d.dir, "spare", n)).st_ino for n in spare_files(d.dir)}
    # Two takes leave six of eight: no refill yet, so both messages are former spares.
    sent = [d.ok("mail", "send", "bob", "-m", f"message {i}") for i in range(2)]
    for i, s in enumerate(sent):
        assert os.stat(s["path"]).st_ino in inodes
        with open(s["path"], encoding="utf-8") as f:
            assert f.read().endswith(f"\n\nmessage {i}")
    # A pool at three quarters or less is refilled: twelve sends later it is still there.
    sent += [d.ok("mail", "send", "bob", "-m", f"message {i}") for i in range(2, 14)]
    wait_for(lambda: len(spare_files(d.dir)) >= 6, what="the pool refilled")
    assert len({os.stat(s["path"]).st_ino for s in sent}) == 14
    got = d.ok("mail", "read", "--handle", "bob", sent[3]["mail_id"])
    assert "message 3" in got["body"]


def test_a_spare_a_crash_left_written_is_emptied_before_use(make_daemon):
    d = make_daemon("--spare-files", "4")
    wait_for(lambda: len(spare_files(d.dir)) == 4, what="the pool filled")
    d.kill9()
    for name in spare_files(d.dir):
        with open(os.path.join(d.dir, "spare", name), "wb") as f:
            f.write(b"LEFTOVER" * 1000)
    d.start()
    for i in range(4):
        s = d.ok("mail", "send", "bob", "-m", f"short {i}")
        with open(s["path"], "rb") as f:
            data = f.read()
        assert b"LEFTOVER" not in data and data.endswith(f"\n\nshort {i}".encode()), data[-80:]


def test_a_spare_replaced_by_a_link_is_never_written_through(make_daemon, tmp_path):
    precious = tmp_path / "precious"
    precious.write_bytes(b"keep me")
    d = make_daemon("--spare-files", "4")
    wait_for(lambda: len(spare_files(d.dir)) == 4, what="the pool filled")
    for name in spare_files(d.dir):
        path = os.path.join(d.dir, "spare", name)
        os.unlink(path)
        os.symlink(str(precious), path)
    s = d.ok("mail", "send", "bob", "-m", "not through the link")
    assert precious.read_bytes() == b"keep me"
    with open(s["path"], "rb") as f:
        assert f.read().endswith(b"\n\nnot through the link")
    assert not os.path.islink(s["path"])


def test_no_spares_when_switched_off(make_daemon):
    d = make_daemon("--spare-files", "0")
    s = d.ok("mail", "send", "bob", "-m", "made its own file")
    with open(s["path"], "rb") as f:
        assert f.read().endswith(b"\n\nmade its own file")
    assert spare_files(d.dir) == []
