"""The delivery states of a message from its recorded facts (benchd.core.delivery), and
the graph of waits (benchd.runtime.waits): cycles found and named, limits held."""

import pytest

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core import delivery
from benchd.core.names import id_ms
from benchd.runtime.waits import Waits
from benchd.store.mailstates import StateRow


def names(ms):
    return [m.state for m in ms]


def test_mail_for_a_session_nobody_runs():
    f = StateRow("20261130T045611.123Z-0001", delivered=1, nw_reason="no-live-session", nw_at=1)
    ms = delivery.marks(f)
    assert names(ms) == ["delivered", "not-woken"]
    assert ms[1].extra == {"reason": "no-live-session"}
    assert delivery.current(ms).state == "not-woken"


def test_a_wake_then_activity_then_a_reply():
    f = StateRow("x", delivered=1, woken=5, read_at=5, read_by="wake", active=7)
    ms = delivery.marks(f, reply="20261130T045611.200Z-0001")
    assert names(ms) == ["delivered", "woken", "read", "active", "replied"]
    assert ms[2].extra == {"by": "wake"}
    assert ms[-1].extra == {"reply": "20261130T045611.200Z-0001"}
    assert ms[-1].at == id_ms("20261130T045611.200Z-0001")
    assert delivery.current(ms).state == "replied"
    # Without the reply, the wake's read does not hide that it woke and acted.
    assert delivery.current(delivery.marks(f)).state == "active"
    woken_only = StateRow("x", delivered=1, woken=5, read_at=5, read_by="wake")
    assert delivery.current(delivery.marks(woken_only)).state == "woken"


def test_read_before_the_wake_is_read_first():
    f = StateRow("x", delivered=1, read_at=3, read_by="read", reader="bob")
    ms = delivery.marks(f)
    assert names(ms) == ["delivered", "not-woken", "read"]
    assert ms[1].extra == {"reason": "read-first"}
    assert ms[2].extra == {"by": "read", "reader": "bob"}
    assert delivery.current(ms).state == "read"


def test_capped_says_until_and_queued_comes_first():
    f = StateRow("x", queued=1, delivered=2, nw_reason="capped", nw_at=2, nw_until=60_000)
    ms = delivery.marks(f)
    assert names(ms) == ["queued", "delivered", "not-woken"]
    assert ms[2].extra == {"reason": "capped", "until": "60000"}
    only_queued = delivery.marks(StateRow("x", queued=1))
    assert delivery.current(only_queued).state == "queued"


def test_id_ms_reads_the_send_time_of_an_id():
    assert id_ms("19700101T000001.250Z-0001") == 1250
    assert id_ms("nope") is None


def _enqueue(op):
    pass  # what a wait logs: test_waits_log_through_the_committer_and_a_stop_drops_it


def test_a_cycle_of_three_is_found_and_named():
    w = Waits(4, 16, _enqueue)
    w.open("alice", "bob")
    w.open("bob", "carol")
    with pytest.raises(WireError) as err:
        w.open("carol", "alice")
    assert err.value.code == "would-deadlock"
    assert "carol -> alice -> bob -> carol" in err.value.message
    assert len(w) == 2  # the refused one was never opened


def test_waits_that_close_no_cycle_are_accepted():
    w = Waits(4, 16, _enqueue)
    w.open("alice", "bob")
    w.open("bob", "carol")
    w.open("carol", None)  # anyone's mail: no edge
    w.open("carol", "dave")
    w.open("dave", "bob@node2")  # another node: the walk ends there
    assert len(w) == 5


def test_waiting_on_yourself_is_a_cycle_and_a_closed_wait_frees_its_edge():
    w = Waits(4, 16, _enqueue)
    with pytest.raises(WireError):
        w.open("alice", "alice")
    first = w.open("alice", "bob")
    with pytest.raises(WireError):
        w.open("bob", "alice")
    w.close(first)
    w.open("bob", "alice")  # alice no longer waits: no cycle


def test_waits_are_bounded_per_caller_and_in_all():
    w = Waits(2, 3, _enqueue)
    w.open("alice", None)
    w.open("alice", None)
    with pytest.raises(WireError) as err:
        w.open("alice", None)
    assert err.value.code == "too-many-waits"
    w.open("bob", None)
    with pytest.raises(WireError) as err:
        w.open("carol", None)
    assert err.value.code == "too-many-waits" and "the daemon" in err.value.message


def test_waits_log_through_the_committer_and_a_stop_drops_it():
    ops = []
    w = Waits(4, 16, ops.append)
    w.open("alice", "bob")
    with pytest.raises(WireError):
        w.open("bob", "alice")
    logged = [ev for op in ops for ev in op.events]
    assert [type(ev) for ev in logged] == [m.WaitOpened, m.WaitRefused]
    assert logged[1].cycle == ["bob", "alice", "bob"]

    def stopping(op):
        raise WireError("shutting-down", "the daemon is stopping")

    w = Waits(4, 16, stopping)
    w.open("alice", None)  # the wait opens all the same
    assert len(w) == 1


def test_the_walk_visits_each_waiting_handle_once():
    w = Waits(1, 10_000, _enqueue)
    # a long chain h0 -> h1 -> ... -> h999: closing it is found, and fast
    for i in range(999):
        w.open(f"h{i}", f"h{i + 1}")
    with pytest.raises(WireError) as err:
        w.open("h999", "h0")
    assert err.value.message.endswith("h998 -> h999")
