"""benchd.store.recovery: the clean-stop seal on real files."""

import os

from benchd.store import recovery
from benchd.store.index import UNREAD, Index


def make(tmp_path):
    root = tmp_path / "mail"
    for h in ("alice", "bob"):
        for sub in ("inbox", "read"):
            (root / h / sub).mkdir(parents=True)
    i = Index(str(tmp_path / "index.sqlite"))
    i.add("bob", "20261130T045611.123Z-0001", UNREAD, "operator", "", "d", 1, "k")
    assert i.flush()
    return str(root), i


def test_a_sealed_index_is_trusted_once(tmp_path):
    root, i = make(tmp_path)
    seal_path = str(tmp_path / recovery.SEAL)
    assert recovery.seal(i, seal_path, root)
    seal = recovery.take_seal(seal_path)
    assert recovery.seal_matches(seal, i.path)
    assert recovery.changed_boxes(root, seal["dirs"], ["bob"]) == set()
    assert recovery.take_seal(seal_path) is None  # taken: a later crash finds none


def test_one_changed_byte_breaks_the_seal(tmp_path):
    root, i = make(tmp_path)
    seal_path = str(tmp_path / recovery.SEAL)
    assert recovery.seal(i, seal_path, root)
    with open(i.path, "r+b") as f:
        f.seek(os.path.getsize(i.path) - 300)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    assert not recovery.seal_matches(recovery.take_seal(seal_path), i.path)


def test_changed_new_and_gone_mailboxes_are_listed_again(tmp_path):
    root, i = make(tmp_path)
    seal_path = str(tmp_path / recovery.SEAL)
    assert recovery.seal(i, seal_path, root)
    seal = recovery.take_seal(seal_path)
    inbox = os.path.join(root, "alice", "inbox")
    with open(os.path.join(inbox, "x.md"), "w") as f:
        f.write("dropped in")
    st = os.stat(inbox)
    os.utime(inbox, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # past any clock tick
    os.makedirs(os.path.join(root, "carol", "inbox"))
    changed = recovery.changed_boxes(root, seal["dirs"], ["bob", "dave"])
    assert changed == {"alice", "carol", "dave"}


def test_a_garbled_seal_is_no_seal(tmp_path):
    p = tmp_path / recovery.SEAL
    p.write_text("{not json")
    assert recovery.take_seal(str(p)) is None
    assert not p.exists()
