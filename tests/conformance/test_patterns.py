"""Patterns a session supplies run in linear time (RE2): a ready pattern that would
backtrack for hours in Python's `re` does not slow the daemon, from whoever it comes
(the operator, a session's delegated job), and one that RE2 cannot run (backreferences,
lookaround) is refused at spawn with `bad-pattern`.

The deadlines below are generous ceilings on a loaded machine, not measurements: with a
backtracking engine each `hello` here waited for minutes.
"""

import time

from tests.conformance.test_delegation import Shell, spawn_cmd, task
from tests.conftest import assert_refused

EVIL = "(a+)+$"
# 40 `a`s then a `!`: a backtracking engine tries about 2**40 ways before it gives up.
PRINTS = "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'; exec sleep 300"
PROMPT = 5.0  # seconds: far above what an answer takes, far below a backtracking search


def answers_promptly(d, rounds: int = 5) -> None:
    """The operator's hello and ps answer within PROMPT while the pattern is matched
    again and again (each mail to the session is a wake that looks at its screen)."""
    for i in range(rounds):
        d.ok("mail", "send", "evil", "-m", f"wake {i}")
        for verb in (["status"], ["ps"]):
            t0 = time.monotonic()
            d.ok(*verb)
            took = time.monotonic() - t0
            assert took < PROMPT, (verb, took)
        t0 = time.monotonic()
        assert d.call({"verb": "hello"})["ok"] is True
        assert time.monotonic() - t0 < PROMPT


def test_the_operators_evil_pattern_does_not_hold_the_daemon(shared, who, tmp_path):
    d = shared
    d.ok("spawn", "--name", who, "--ready", EVIL, "--", "sh", "-c", PRINTS)
    d.wait_until(lambda: "!" in d.bench("tail", who).out, 30, "the a's on the screen")
    answers_promptly(d)
    t0 = time.monotonic()
    d.ok("kill", "--tree", who)
    assert time.monotonic() - t0 < PROMPT * 2


def test_a_delegated_jobs_evil_pattern_does_not_hold_the_daemon(shared, who, tmp_path):
    d = shared
    alice = Shell(d, tmp_path, who)
    t = task(tmp_path)
    child = alice.ok(spawn_cmd(t, PRINTS, "--name", who + "e", "--ready", f"'{EVIL}'"))
    assert child["handle"] == who + "e"
    d.wait_until(lambda: "!" in d.bench("tail", who + "e").out, 30, "the a's on the screen")
    answers_promptly(d)
    d.ok("kill", "--tree", who)
    d.wait_event("session/exited", lambda e: e["handle"] == who + "e")


def test_a_pattern_re2_cannot_run_is_refused_at_spawn(shared, who, tmp_path):
    d = shared
    before = {s["session"] for s in d.ok("ps", "-a")["sessions"]}
    for pattern in (r"(a)\1", "(?=a)b", "(?<!x)y"):
        r = d.bench("spawn", "--json", "--ready", pattern, "--", "sleep", "30")
        err = assert_refused(r, "bad-pattern")
        assert "backreferences or lookaround" in err["message"]
    r = d.bench("spawn", "--json", "--ready", "a" * 1001, "--", "sleep", "30")
    assert_refused(r, "bad-pattern")
    # From inside a session: the same refusal, nothing spawned.
    alice = Shell(d, tmp_path, who)
    err = alice.refused(spawn_cmd(task(tmp_path), "true", "--ready", r"'(a)\1'"), "bad-pattern")
    assert "linear time" in err["message"]
    # (The module's other tests may have left sessions of their own.)
    new = [s["handle"] for s in d.ok("ps", "-a")["sessions"] if s["session"] not in before]
    assert new == [who], new
    # Patterns the presets use still compile (RE2 reads them as re did).
    d.ok("spawn", "--name", "pi", "--ready", r"\d+(?:\.\d+)?%/\d+k", "--", "sleep", "30")
