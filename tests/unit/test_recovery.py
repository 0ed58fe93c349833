"""benchd.store.recovery: the clean-stop seal and the start's check of the names, on
real files."""

import os

import pytest

from benchd.store import recovery
from benchd.store.index import UNREAD, Index
from tests.support.clock import still

ID1 = "20261130T045611.123Z-0001"


def make(tmp_path):
    root = tmp_path / "mail"
    for h in ("alice", "bob"):
        for sub in ("inbox", "read"):
            (root / h / sub).mkdir(parents=True)
    (root / "bob" / "inbox" / f"{ID1}.md").write_text("a message")
    i = Index(str(tmp_path / "index.sqlite"), now=still)
    i.add("bob", ID1, UNREAD, "operator", "", "d", 1, "k")
    assert i.flush()
    return str(root), i


def sealed(tmp_path):
    root, i = make(tmp_path)
    seal_path = str(tmp_path / recovery.SEAL)
    assert recovery.seal(i, seal_path)
    seal = recovery.take_seal(seal_path)
    again = Index(i.path, now=still)
    assert recovery.seal_matches(seal, again.path)
    names = recovery.index_names(again)
    return root, names, seal_path


def test_a_sealed_index_is_trusted_once(tmp_path):
    root, names, seal_path = sealed(tmp_path)
    assert recovery.changed_boxes(root, names) == set()
    assert recovery.take_seal(seal_path) is None  # taken: a later crash finds none


def test_one_changed_byte_breaks_the_seal(tmp_path):
    root, i = make(tmp_path)
    seal_path = str(tmp_path / recovery.SEAL)
    assert recovery.seal(i, seal_path)
    with open(i.path, "r+b") as f:
        f.seek(os.path.getsize(i.path) - 300)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    assert not recovery.seal_matches(recovery.take_seal(seal_path), i.path)


def test_names_added_removed_or_moved_are_listed_again_whatever_the_mtimes(tmp_path):
    root, names, _ = sealed(tmp_path)
    bob_inbox = os.path.join(root, "bob", "inbox")
    st = os.stat(bob_inbox)
    os.rename(os.path.join(bob_inbox, f"{ID1}.md"), os.path.join(root, "bob", "read", f"{ID1}.md"))
    os.utime(bob_inbox, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime says nothing
    with open(os.path.join(root, "alice", "inbox", "20261130T045611.123Z-0002.md"), "w") as f:
        f.write("dropped in")
    os.makedirs(os.path.join(root, "carol", "inbox"))
    with open(os.path.join(root, "carol", "inbox", "20261130T045611.123Z-0003.md"), "w") as f:
        f.write("a new mailbox")
    os.makedirs(os.path.join(root, "erin", "inbox"))  # empty: nothing to list
    assert recovery.changed_boxes(root, {**names, "dave": names["bob"]}) == {
        "alice",
        "bob",
        "carol",
        "dave",
    }


def test_only_regular_md_files_are_names(tmp_path):
    root, names, _ = sealed(tmp_path)
    os.mkdir(os.path.join(root, "bob", "inbox", "x.md"))  # a directory is no message
    with open(os.path.join(root, "bob", "read", "notes.txt"), "w") as f:
        f.write("not mail")
    assert recovery.changed_boxes(root, names) == set()


def test_rows_removed_by_hand_differ_from_the_names_on_disk(tmp_path):
    root, i = make(tmp_path)
    assert recovery.changed_boxes(root, recovery.index_names(i)) == set()
    # An edit that keeps the counts in step: the rows, not a record, are compared.
    i.w.execute("DELETE FROM messages WHERE id=?", (ID1,))
    i.w.execute("UPDATE counts SET n=0")
    assert recovery.changed_boxes(root, recovery.index_names(i)) == {"bob"}


def test_rows_that_disagree_with_the_counts_are_an_edit(tmp_path):
    root, i = make(tmp_path)
    i.w.execute("DELETE FROM messages WHERE id=?", (ID1,))  # the count still says 1
    with pytest.raises(recovery.Edited, match="counts disagree"):
        recovery.index_names(i)
    root, i = make(tmp_path / "again")
    i.w.execute("UPDATE messages SET state=7")
    with pytest.raises(recovery.Edited, match="state 7"):
        recovery.index_names(i)


def test_a_message_file_beside_a_directory_named_like_one_is_seen(tmp_path):
    root, names, _ = sealed(tmp_path)
    os.mkdir(os.path.join(root, "bob", "inbox", "x.md"))  # no message
    with open(os.path.join(root, "bob", "inbox", "20261130T045611.123Z-0009.md"), "w") as f:
        f.write("dropped in")
    assert recovery.changed_boxes(root, names) == {"bob"}


def test_a_garbled_seal_is_no_seal(tmp_path):
    p = tmp_path / recovery.SEAL
    p.write_text("{not json")
    assert recovery.take_seal(str(p)) is None
    assert not p.exists()
