"""One identity per message across nodes: references (pure), and threads joined through
the origins of received copies, also after the index is rebuilt from the files."""

import pytest

from bench_wire.errors import WireError
from benchd.core import frontmatter
from benchd.core import names as refs
from benchd.core.frontmatter import FrontMatter
from benchd.store import queries, search
from benchd.store.index import UNREAD, Index
from benchd.store.recovery import reconcile
from tests.support.clock import still

A = "20261130T045611.123Z-0001"
B = "20261130T045612.000Z-0002"


def test_references_are_split_and_checked():
    assert refs.split_ref(A) == (A, None)
    assert refs.split_ref(f"{A}@node2") == (A, "node2")
    assert refs.check_ref(f"{A}@node2") == f"{A}@node2"
    for bad in ("", "x", f"{A}@", f"{A}@Node2", f"{A}@a@b", f"@{A}", "../etc", None, 7):
        with pytest.raises(WireError) as e:
            refs.split_ref(bad)
        assert e.value.code == "bad-id" and repr(bad) in e.value.message


def test_a_reference_is_bare_on_its_own_node_and_full_between_nodes():
    assert refs.local_ref(f"{A}@node1", "node1") == A
    assert refs.local_ref(f"{A}@node2", "node1") == f"{A}@node2"
    assert refs.local_ref(A, "node1") == A
    assert refs.full_ref(A, "node1") == f"{A}@node1"
    assert refs.full_ref(f"{A}@node2", "node1") == f"{A}@node2"
    # Received on node1 from node2: bare names node2's message; node1's own comes back bare.
    assert refs.received_ref(A, "node2", "node1") == f"{A}@node2"
    assert refs.received_ref(f"{A}@node1", "node2", "node1") == A
    assert refs.received_ref(f"{A}@node3", "node2", "node1") == f"{A}@node3"
    assert refs.identity(A, None, "node1") == f"{A}@node1"
    assert refs.identity(B, f"{A}@node2", "node1") == f"{A}@node2"


def _write(root, handle: str, meta: dict, body: bytes = b"x") -> None:
    d = root / handle / "inbox"
    d.mkdir(parents=True, exist_ok=True)
    (root / handle / "read").mkdir(exist_ok=True)
    full = {"from": "x", "to": handle, "subject": "", "date": "d", "key": "k-" + meta["id"]}
    (d / f"{meta['id']}.md").write_bytes(frontmatter.render({**full, **meta}, body))


def test_a_thread_joins_copies_through_their_origins_after_a_rebuild(tmp_path):
    # node1's files: a copy of node2's message (its id there: A@node2), a reply written
    # here naming it by that identity, and a copy of node2's answer naming that reply bare.
    root = tmp_path / "mail"
    copy, reply, answer = (
        "20261201T100000.000Z-0001",
        "20261201T100001.000Z-0001",
        "20261201T100002.000Z-0001",
    )
    _write(root, "alice", {"id": copy, "from": "operator@node2", "origin": f"{A}@node2"})
    _write(
        root,
        "@outbound",
        {"id": reply, "from": "alice@node1", "to": "operator@node2", "in-reply-to": f"{A}@node2"},
    )
    _write(
        root,
        "alice",
        {"id": answer, "from": "operator@node2", "in-reply-to": reply, "origin": f"{B}@node2"},
    )
    index = Index(str(tmp_path / "index.sqlite"), now=still)
    reconcile(str(root), index)  # the index rebuilt from the files alone
    assert index.flush()
    for start in (copy, reply, answer):
        got = [link.mail_id for link in queries.thread(index.w, start).links]
        assert got == [copy, reply, answer], start
    assert search.named(index.w, f"{A}@node2") == [copy]
    assert search.origin_of(index.w, copy) == f"{A}@node2"
    assert search.origin_of(index.w, reply) is None
    # Removing the copy forgets its origin: the reference names nothing here any more.
    index.remove("alice", copy)
    assert index.flush()
    assert search.named(index.w, f"{A}@node2") == []
    assert [link.mail_id for link in queries.thread(index.w, reply).links] == [reply, answer]


def test_an_index_from_before_the_origins_table_still_answers(tmp_path):
    index = Index(str(tmp_path / "index.sqlite"), now=still)
    index.add("bob", A, UNREAD, "operator", "", "d", 1, "k")
    meta = FrontMatter(id=A, sender="operator", to="bob", date="d", key="k")
    index.add_text("bob", A, meta, b"x")
    assert index.flush()
    index.w.execute("DROP TABLE mail_origins")
    index.close()
    index = Index(index.path, now=still)  # opening it makes the table
    assert search.named(index.w, f"{A}@node2") == []
    assert search.origin_of(index.w, A) is None
    assert [link.mail_id for link in queries.thread(index.w, A).links] == [A]
