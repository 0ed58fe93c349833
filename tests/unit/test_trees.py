"""benchd.core.trees and the tree side of benchd.core.limits: a tree's budgets, fed
times (no clock), each request charged whole or refused whole."""

from dataclasses import dataclass

from benchd.core.limits import Limits, SendLimits
from benchd.core.trees import (
    HOUR_S,
    DelegationLimits,
    HourWindow,
    Quota,
    Refused,
    TreeBudgets,
    TreeLimits,
    root_of,
)

LIMITS = Limits(
    send_burst=5,
    send_rate=1.0,
    operator_send_burst=50,
    operator_send_rate=10.0,
    mailbox_messages=100,
    mailbox_bytes=10_000,
    reply_to_max=16,
    tree_bytes=1000,
    tree_mailboxes=3,
)


@dataclass
class S:
    id: str
    handle: str
    lineage: tuple[str, ...] = ()


def test_the_root_is_the_last_spawner_or_the_session_itself():
    assert root_of(S("s1", "alice")) == "s1"
    assert root_of(S("s3", "alice.1.1", ("s2", "s1"))) == "s1"


def test_an_hour_window_forgets_what_is_older_than_an_hour():
    w = HourWindow()
    w.add(0.0, 10)
    w.add(30.0, 5)  # the same minute
    w.add(600.0, 1)
    assert len(w.slots) == 2 and w.total(600.0) == 16
    assert w.seconds_until(600.0, 10, 20) == HOUR_S - 600.0  # the first minute must leave
    assert w.seconds_until(600.0, 4, 20) == 0.0  # fits now
    assert w.total(HOUR_S - 1) == 16
    assert w.total(HOUR_S + 1) == 1  # the first minute has left


def test_an_hour_window_holds_at_most_sixty_numbers():
    w = HourWindow()
    for t in range(0, 36_000, 7):
        w.add(float(t), 1)
    assert len(w.slots) <= 60


def test_all_sessions_of_a_tree_share_the_roots_bucket():
    s = SendLimits(LIMITS)
    for who in ("alice", "alice.1", "alice.2", "alice.1.1", "alice"):
        assert s.tree(who, "s1", "alice", 1, 0, 0, 0.0) is None
    r = s.tree("alice.2", "s1", "alice", 1, 0, 0, 0.0)
    assert r is not None and r.code == "rate-limited" and r.budget == "sends"
    assert r.tree == "s1" and r.announce and r.retry_after == 1.0
    assert "alice's tree (of which alice.2 is a job) is sending too fast" in r.message
    assert s.tree("alice", "s1", "alice", 1, 0, 0, 0.0).announce is False  # one event a run
    assert s.tree("bob", "s9", "bob", 1, 0, 0, 0.0) is None  # another tree
    assert s.take("operator", True, 1, 0.0) is None  # the operator's own bucket


def test_bytes_and_new_mailboxes_an_hour_are_the_trees():
    s = SendLimits(LIMITS)
    assert s.tree("alice", "s1", "alice", 1, 600, 1, 0.0) is None
    r = s.tree("alice.1", "s1", "alice", 1, 500, 0, 10.0)
    assert r is not None and r.budget == "bytes" and r.limit == 1000
    assert "has sent 600 bytes of mail" in r.message and "--tree-bytes" in r.message
    assert r.retry_after == HOUR_S - 10.0
    assert s.tree("alice.1", "s1", "alice", 1, 400, 2, 10.0) is None  # exactly the caps
    r = s.tree("alice", "s1", "alice", 1, 0, 1, 20.0)
    assert r is not None and r.budget == "mailboxes" and "--tree-mailboxes" in r.message
    # More than a budget holds at all is refused too, and says to wait the hour.
    r = s.tree("bob", "s2", "bob", 1, 5000, 0, 0.0)
    assert r is not None and r.budget == "bytes" and r.retry_after == HOUR_S
    # An hour on, the budgets are whole again.
    assert s.tree("alice", "s1", "alice", 1, 1000, 3, HOUR_S + 61) is None


def test_a_refused_request_spends_nothing():
    s = SendLimits(LIMITS)
    assert s.tree("alice", "s1", "alice", 1, 2000, 0, 0.0) is not None  # bytes
    assert s.tree("alice", "s1", "alice", 9, 0, 0, 0.0) is not None  # more than the burst
    # Neither spent sends, bytes or mailboxes.
    assert s.tree("alice", "s1", "alice", 5, 1000, 3, 0.0) is None


def test_idle_trees_are_forgotten():
    b = TreeBudgets(TreeLimits(1000, 10))
    for i in range(2000):
        b.spend(f"s{i}", 0.0, 1, 1)
    b.spend("late", HOUR_S + 120, 1, 1)
    assert len(b.bytes) < 1100 and len(b.mailboxes) < 1100


def test_a_trees_spawns_share_the_roots_window():
    q = Quota(DelegationLimits(children=10, depth=3, per_hour=3))
    q.started("s1", "s2", 0.0, root="s1")  # alice's own child
    q.started("s2", "s3", 1.0, root="s1")  # the child's child
    q.check("s3", "alice.1.1", 3, 2.0, root="s1")  # one left
    q.started("s3", "s4", 2.0, root="s1")
    for parent, handle in (("s1", "alice"), ("s2", "alice.1"), ("s3", "alice.1.1")):
        try:
            q.check(parent, handle, 2, 3.0, root="s1")
        except Refused as err:
            assert err.code == "rate-limited" and "tree" in err.message
        else:
            raise AssertionError(f"{handle} spawned past its tree's budget")
    q.check("s9", "bob", 1, 3.0, root="s9")  # another tree
    q.settled("s1", "s2")  # settling gives nothing back
    try:
        q.check("s1", "alice", 1, 4.0, root="s1")
    except Refused:
        pass
    else:
        raise AssertionError("settling reset the window")
