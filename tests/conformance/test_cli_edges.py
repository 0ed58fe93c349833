"""The command line's edges a new user hits, through the real `bench` and `benchd`: hints
for commands from git, docker and tmux habits and for mistyped handles, "no such
mailbox" apart from "no unread mail", an empty or impossible --dir, one wording for
empty results, human idle times and named signals."""

import json
import os
import re
import subprocess

import pytest

from tests.conformance.test_sessions import wait_screen
from tests.conftest import BENCH, spawn

# About the `bench` process: every command here runs as one (tests/support/inproc.py).
BENCH_CLI = "process"

# ---------------------------------------------------------------- command hints


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        (["send", "bob", "-m", "hi"], "bench mail send"),
        (["ls"], "bench ps"),
        (["logs", "alice"], "bench tail"),
        (["list"], "bench mail list"),
        (["mail", "ls"], "bench mail list"),
        (["mial", "list"], "bench mail"),  # a typo still gets its hint
        (["help", "send"], "bench mail send"),
    ],
    ids=" ".join,
)
def test_habits_from_git_docker_and_tmux_get_the_bench_command(typed, meant, bench_dir):
    env = dict(os.environ, BENCH_DIR=bench_dir)
    r = subprocess.run([BENCH, *typed], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, r
    # One line, bench's own form: `bench: <sentence> [usage]`, never click's four.
    assert f"(did you mean {meant}?)" in r.stderr, r.stderr
    assert r.stderr.startswith("bench: ") and r.stderr.endswith(" [usage]\n"), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


# ---------------------------------------------------------------- handles and mailboxes


def test_an_unknown_recipient_gets_the_nearest_handle(shared, who):
    bob, carol = who + "bob", who + "carol"
    shared.ok("mail", "send", bob, "-m", "first")
    r = shared.bench("mail", "send", who + "Bob", "-m", "hi")
    assert r.rc == 1 and "[bad-handle]" in r.err and f"(did you mean {bob}?)" in r.err, r
    for argv in (
        ["mail", "list", "--handle", who + "BOB"],
        ["mail", "read", "--handle", who + "Bob"],
    ):
        r = shared.bench(*argv)
        assert r.rc == 1 and f"(did you mean {bob}?)" in r.err, (argv, r)
    spawn(shared, "sleep", "600", name=carol)
    # A valid handle nobody holds: delivered, with the warning and the likely handle.
    r = shared.bench("mail", "send", who + "caorl", "-m", "hi")
    assert r.rc == 0 and "new-mailbox" in r.out and f"(did you mean {carol}?)" in r.out, r
    # Nothing close: no guess.
    r = shared.bench("mail", "send", "zebra-42", "-m", "hi")
    assert r.rc == 0 and "new-mailbox" in r.out and "did you mean" not in r.out, r
    shared.ok("kill", carol)


def test_no_such_mailbox_is_not_no_unread_mail(shared, who):
    bob = who + "bob"
    shared.ok("mail", "send", bob, "-m", "hi")
    shared.ok("mail", "read", "--handle", bob)
    empty = shared.bench("mail", "list", "--handle", bob)
    assert empty.rc == 0 and empty.out.strip() == f"no unread mail for {bob}", empty
    none = shared.bench("mail", "list", "--handle", bob + "b")
    assert none.rc == 0, none
    assert none.out.strip() == (
        f"no such mailbox: nothing was ever sent to {bob}b (did you mean {bob}?)"
    ), none
    # --json stays the daemon's answer, exactly.
    assert shared.ok("mail", "list", "--handle", bob + "b")["messages"] == []
    # Reading from an empty mailbox says it the same way.
    r = shared.bench("mail", "read", "--handle", bob)
    assert r.rc == 1 and f"no unread mail for {bob} [no-unread]" in r.err, r


def test_mail_to_the_operator_never_warns_new_mailbox(shared):
    a = shared.ok("mail", "send", "operator", "-m", "first ever")
    assert a["new_mailbox"] is False, a
    r = shared.bench("mail", "send", "operator", "-m", "again")
    assert r.rc == 0 and "new-mailbox" not in r.out, r


# ---------------------------------------------------------------- --dir


@pytest.mark.parametrize(
    "argv",
    [
        ["--dir", "", "status"],
        ["status", "--dir", ""],
        ["status", "--dir="],
        ["mail", "send", "bob", "-m", "hi", "--dir", ""],  # the fast path
        ["--dir=", "mail", "list"],
        ["up", "--dir", ""],
        ["daemon", "--dir", ""],
        ["mcp", "--dir", ""],
    ],
    ids=repr,
)
def test_an_empty_dir_is_a_usage_error(argv, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "XDG_"))}
    env["HOME"] = str(home)
    r = subprocess.run([BENCH, *argv], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "--dir is empty" in r.stderr and "[usage]" in r.stderr, r
    assert not (home / ".local").exists()  # the default was not used behind our back


def test_a_dir_that_is_a_file_or_cannot_be_made_is_named(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    cases = [
        (["up", "--dir", str(afile)], f"{afile} is a file, not a directory"),
        (["up", "--dir", str(afile / "sub")], f"{afile} is a file, not a directory"),
        (["mail", "list", "--dir", str(afile)], f"{afile} is a file, not a directory"),
        (["status", "--dir", str(afile / "sub")], f"{afile} is a file, not a directory"),
    ]
    if os.path.isdir("/proc/self"):
        cases.append(
            (
                ["up", "--dir", "/proc/no-such-dir/bench"],
                "does not exist and cannot be made in /proc",
            )
        )
    for argv, said in cases:
        r = subprocess.run([BENCH, *argv], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 2 and "[bad-dir]" in r.stderr and said in r.stderr, (argv, r)
        assert "Errno" not in r.stderr and "unsafe-dir" not in r.stderr, r.stderr


# ---------------------------------------------------------------- wording


def test_empty_results_have_one_wording(make_daemon):
    d = make_daemon()
    assert d.bench("ps").out.strip() == "no live sessions"
    assert d.bench("ps", "-a").out.strip() == "no sessions, live or exited"
    assert d.bench("mail", "list").out.strip() == "no unread mail for operator"
    assert d.bench("mail", "list", "--state", "all").out.strip() == "no mail for operator"
    s = spawn(d, "bash", "-c", "exit 3", name="gone")
    d.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert d.bench("ps").out.strip() == "no live sessions (1 exited: bench ps -a)"


def test_one_search_hit_is_one_match(shared, who):
    word = f"unicorn{who}"  # search looks in every mailbox: a word no other test sends
    shared.ok("mail", "send", who, "-s", "deploy", "-m", f"the {word} is green")
    assert shared.bench("mail", "search", word).out.splitlines()[-1] == "1 match"
    shared.ok("mail", "send", who, "-m", f"another {word}")
    assert shared.bench("mail", "search", word).out.splitlines()[-1] == "2 matches"


def test_idle_is_human_in_text_and_exact_in_json(shared, who):
    spawn(shared, "bash", "-c", "echo up; exec sleep 600", name=who)
    wait_screen(shared, who, "up")
    shared.wait_until(
        lambda: (shared.ok("ps", who)["sessions"][0].get("idle_ms") or 0) >= 1000, 30, "1 s idle"
    )
    lines = shared.bench("ps", who).out.splitlines()
    head, row = lines[0].split(), lines[1].split()
    idle = row[head.index("IDLE")]
    assert re.fullmatch(r"\d+[smhd]", idle), lines  # 2s, 10m, 2h: never 620.8s
    assert isinstance(shared.ok("ps", who)["sessions"][0]["idle_ms"], int)
    shared.ok("kill", who)


def test_signals_are_named_in_ps_and_events(shared, who):
    s = spawn(shared, "sleep", "600", name=who)
    shared.ok("kill", who)  # SIGHUP first: sleep ends on it
    ev = shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 1  # the event itself keeps the number
    row = shared.bench("ps", "-a", s["session"]).out.splitlines()[1]
    assert " SIGHUP " in row and "sig1" not in row, row
    text = shared.bench("events", "--kind", "session/exited", "--session", s["session"]).out
    assert "signal=SIGHUP" in text and "signal=1" not in text, text
    as_json = [json.loads(x) for x in shared.bench("events", "--json").out.splitlines()]
    mine = [e for e in as_json if e["kind"] == "session/exited" and e["session"] == s["session"]]
    assert [e["signal"] for e in mine] == [1]
