"""benchd.core.authority: one test per cell of the permission matrix that concerns
sessions and their descendants (the operator's column is "yes" throughout).

The tree used: the operator started alice (s0a) and bob (s0b); alice started alice.1
(s1), which started alice.1.1 (s11); bob started bob.1 (sb1).
"""

import pytest

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core import authority
from benchd.core.authority import Caller


class S:
    def __init__(self, sid: str, handle: str, lineage: tuple[str, ...] = ()):
        self.id, self.handle, self.lineage = sid, handle, lineage


TREE = {
    "alice": S("s0a", "alice"),
    "bob": S("s0b", "bob"),
    "alice.1": S("s1", "alice.1", ("s0a",)),
    "alice.1.1": S("s11", "alice.1.1", ("s1", "s0a")),
    "bob.1": S("sb1", "bob.1", ("s0b",)),
}


def family(name: str) -> tuple[str, ...]:
    s = TREE.get(name) or next((x for x in TREE.values() if x.id == name), None)
    return () if s is None else (s.id, *s.lineage)


def who(handle: str) -> Caller:
    s = TREE[handle]
    return Caller(s.handle, s)


OPERATOR = Caller("operator")


def allowed(caller: Caller, req: m.Request) -> bool:
    try:
        authority.check(caller, req, family)
    except WireError as err:
        assert err.code == "forbidden" and err.message
        return False
    return True


JOB = m.JobMailSpec(body="do it")


# ------------------------------------------------------------------ session/spawn


def test_spawn_a_session_may_start_a_job():
    assert allowed(who("alice"), m.Spawn(argv=["true"], job=JOB))
    assert allowed(who("alice.1.1"), m.Spawn(argv=["true"], job=JOB, name="x"))


def test_spawn_a_session_may_not_start_a_plain_session():
    assert not allowed(who("alice"), m.Spawn(argv=["true"]))


def test_spawn_the_operator_may_start_either():
    assert allowed(OPERATOR, m.Spawn(argv=["true"]))
    assert allowed(OPERATOR, m.Spawn(argv=["true"], job=JOB))


def test_spawn_outside_the_sandbox_is_the_operators_only():
    assert allowed(OPERATOR, m.Spawn(argv=["true"], sandbox=False))
    assert not allowed(who("alice"), m.Spawn(argv=["true"], job=JOB, sandbox=False))


# ------------------------------------------------------------------ session/tail


@pytest.mark.parametrize("target", ["alice", "s0a"])
def test_tail_itself(target):
    assert allowed(who("alice"), m.SessionTail(handle=target))


@pytest.mark.parametrize("target", ["alice.1", "s1", "alice.1.1", "s11"])
def test_tail_its_descendants(target):
    assert allowed(who("alice"), m.SessionTail(handle=target, screen=True))


@pytest.mark.parametrize(
    ("caller", "target"),
    [
        ("alice", "bob"),  # another session
        ("alice", "bob.1"),  # another session's child
        ("alice.1", "alice"),  # its parent
        ("alice.1.1", "alice.1"),  # its parent, deeper
        ("alice", "nobody"),  # no such session: not told apart from someone else's
    ],
)
def test_tail_nothing_else(caller, target):
    assert not allowed(who(caller), m.SessionTail(handle=target))


# ------------------------------------------------------------------ session/type


@pytest.mark.parametrize("target", ["alice.1", "alice.1.1"])
def test_type_into_its_descendants(target):
    assert allowed(who("alice"), m.SessionType(handle=target, text="x"))


@pytest.mark.parametrize(
    ("caller", "target"),
    [("alice", "alice"), ("alice", "bob"), ("alice", "bob.1"), ("alice.1", "alice")],
)
def test_type_nowhere_else(caller, target):
    assert not allowed(who(caller), m.SessionType(handle=target, text="x"))


# ------------------------------------------------------------------ agent/answer


@pytest.mark.parametrize("allow", [True, False])
@pytest.mark.parametrize("target", ["alice.1", "alice.1.1"])
def test_answer_approvals_of_its_descendants(target, allow):
    assert allowed(who("alice"), m.AgentAnswer(handle=target, allow=allow))
    assert allowed(OPERATOR, m.AgentAnswer(handle=target, allow=allow))


@pytest.mark.parametrize(
    ("caller", "target"),
    [("alice", "alice"), ("alice", "bob"), ("alice", "bob.1"), ("alice.1", "alice")],
)
def test_answer_no_other_approvals(caller, target):
    # Not its own: an agent that approved its own prompts would need no approval.
    assert not allowed(who(caller), m.AgentAnswer(handle=target, allow=True))


def test_reports_are_anyones_the_handler_places_them():
    assert allowed(who("bob"), m.AgentReport(event="stop"))


# ------------------------------------------------------------------ session/kill


def test_kill_itself_without_cancel():
    assert allowed(who("alice.1"), m.SessionKill(handle="alice.1"))
    assert allowed(who("alice.1"), m.SessionKill(handle="alice.1", tree=True))


def test_kill_itself_with_cancel_is_the_operators():
    assert not allowed(who("alice.1"), m.SessionKill(handle="alice.1", cancel=True))


@pytest.mark.parametrize("target", ["alice.1", "alice.1.1", "s11"])
@pytest.mark.parametrize("cancel", [False, True])
@pytest.mark.parametrize("tree", [False, True])
def test_kill_and_cancel_its_descendants(target, cancel, tree):
    assert allowed(who("alice"), m.SessionKill(handle=target, cancel=cancel, tree=tree))


@pytest.mark.parametrize(
    ("caller", "target"),
    [("alice", "bob"), ("alice", "bob.1"), ("alice.1", "alice"), ("alice.1.1", "alice.1")],
)
@pytest.mark.parametrize("cancel", [False, True])
def test_kill_nothing_else(caller, target, cancel):
    assert not allowed(who(caller), m.SessionKill(handle=target, cancel=cancel))


# ------------------------------------------------------------------ still the operator's


@pytest.mark.parametrize(
    "req",
    [
        m.SessionAttach(handle="alice.1"),
        m.SessionScreen(handle="alice.1"),
        m.SessionPrune(),
        m.Stop(),
    ],
)
def test_operator_only_verbs_stay_so_even_for_descendants(req):
    assert not allowed(who("alice"), req)
    assert allowed(OPERATOR, req)


def test_without_a_family_a_session_has_no_descendants():
    # The default family knows no sessions: nothing below anyone.
    with pytest.raises(WireError):
        authority.check(who("alice"), m.SessionKill(handle="alice.1"))


# ------------------------------------------------------------------ one form of refusal


@pytest.mark.parametrize(
    "req",
    [
        m.SessionTail(handle="bob"),
        m.SessionType(handle="bob", text="x"),
        m.SessionKill(handle="bob"),
        m.SessionKill(handle="alice", cancel=True),
        m.MailList(handle="bob"),
        m.MailSearch(query="x", handle="bob"),
        m.Stop(),
        m.SessionPrune(),
        m.Spawn(argv=["sh"]),
    ],
    ids=lambda r: r.__struct_config__.tag,
)
def test_every_refusal_has_one_form(req):
    # "a session may <do> only <what it may>, not <this>: that is the operator's"
    with pytest.raises(WireError) as got:
        authority.check(who("alice"), req, family)
    text = got.value.message
    assert text.startswith("a session may "), text
    assert text.endswith(("that is the operator's", "those are the operator's")), text
    if getattr(req, "handle", None) == "bob":
        assert "not bob" in text and "(alice)" in text or "jobs it started" in text, text
