"""benchd.core.trees: the three limits on a spawning session, and derived handles."""

import pytest

from benchd.core.trees import WINDOW_S, DelegationLimits, Quota, Refused, derived_handle


def refused(q: Quota, parent="p", depth=1, now=0.0) -> Refused | None:
    try:
        q.check(parent, "alice", depth, now)
    except Refused as err:
        return err
    return None


def test_children_fire_at_the_limit_and_free_on_settle():
    q = Quota(DelegationLimits(children=2, depth=3, per_hour=100))
    q.started("p", "c1", 0.0)
    assert refused(q) is None
    q.started("p", "c2", 1.0)
    err = refused(q)
    assert err is not None and err.code == "too-many-children" and err.value == 2
    assert err.limit == "children"
    q.settled("p", "c1")
    assert refused(q) is None
    # Another parent is not affected.
    q.started("p", "c3", 2.0)
    assert refused(q, parent="other") is None


def test_depth_fires_beyond_the_limit():
    q = Quota(DelegationLimits(children=4, depth=2, per_hour=100))
    assert refused(q, depth=2) is None
    err = refused(q, depth=3)
    assert err is not None and err.code == "too-deep" and err.value == 2


def test_rate_is_a_sliding_hour_not_freed_by_settling():
    q = Quota(DelegationLimits(children=10, depth=3, per_hour=2))
    q.started("p", "c1", 0.0)
    q.settled("p", "c1")
    q.started("p", "c2", 10.0)
    q.settled("p", "c2")
    err = refused(q, now=20.0)
    assert err is not None and err.code == "rate-limited" and "3581 s" in err.message
    assert refused(q, now=WINDOW_S - 1) is not None
    assert refused(q, now=WINDOW_S + 0.5) is None  # the first spawn has left the window


def test_derived_handle_is_the_first_fresh_number():
    taken = {"alice.1", "alice.2"}
    assert derived_handle("alice", taken.__contains__) == "alice.3"
    assert derived_handle("bob", taken.__contains__) == "bob.1"


@pytest.mark.parametrize("n", [62, 63, 64])
def test_derived_handle_fits_in_64_characters(n):
    parent = "a" * n
    h = derived_handle(parent, lambda h: False)
    assert len(h) <= 64 and h.endswith(".1")
    taken = {h}
    assert derived_handle(parent, taken.__contains__).endswith(".2")
