"""The `bench` commands the tests run inside their own process (tests/support/inproc.py)
answer exactly as the `bench` process does: the same exit code, stdout and stderr, for
answers, refusals and usage errors, in JSON and in words."""

import pytest

from tests.support import inproc


def both(d, *args: str) -> tuple[tuple, tuple]:
    """`bench ARGS` as a process, then in this process: (rc, out, err) of each."""
    assert inproc.fits(args), args
    d.cli_in_process = False
    try:
        p = d.bench(*args)
    finally:
        d.cli_in_process = True
    here = inproc.run(list(args), d.env())
    return (p.rc, p.out, p.err), here


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "words"])
def test_answers_refusals_and_usage_errors_are_the_processes(shared, who, as_json):
    d = shared
    j = ["--json"] if as_json else []
    key = f"{who}-k"
    first = d.ok("mail", "send", who, "-s", "same", "-m", "body", "--key", key)
    d.ok("mail", "read", first["mail_id"], "--handle", who)  # read: both runs see it alike
    cases = [
        ("mail", "send", who, "-s", "same", "-m", "body", "--key", key, *j),  # a duplicate
        ("mail", "list", "--handle", who, "--state", "all", *j),
        ("mail", "read", first["mail_id"], "--handle", who, *j),
        ("mail", "status", first["mail_id"], *j),
        ("mail", "thread", first["mail_id"], *j),
        ("mail", "read", "../../etc/passwd", *j),  # refused: bad-id
        ("mail", "list", "--state", "sideways", *j),  # a usage error, from click
        ("mail", "send", *j),  # no recipient: click's usage error too
        ("kill", f"{who}-nobody", *j),  # refused: no-such-session
    ]
    for args in cases:
        process, here = both(d, *args)
        assert here == process, args
        # An answer or a refusal of the daemon or the parser, never a crash.
        assert "Traceback" not in here[2], args


def test_what_is_more_than_one_request_runs_as_a_process():
    assert inproc.fits(("mail", "send", "bob", "-m", "x"))
    assert inproc.fits(("spawn", "--name", "x", "--", "sh", "-c", "--help"))
    for args in [
        ("up",),
        ("down",),
        ("mail", "wait"),
        ("tail", "bob", "-f"),
        ("mail", "send", "--help"),
        ("attach", "bob"),
        ("mcp",),
    ]:
        assert not inproc.fits(args), args
