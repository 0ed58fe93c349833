"""The newcomer's round of the CLI (issue 40's defects 6-9 and its frictions): each test
does what the trial did, with a real daemon and the real `bench`.
"""

import os
import re
import sys

import pytest

from tests.conftest import assert_refused, spawn
from tests.support.wait import wait_for

# About the `bench` process: every command here runs as one (tests/support/inproc.py).
BENCH_CLI = "process"

ONE_LINE = re.compile(r"^bench: [^\n]+ \[[a-z-]+\]\n$")


# ---------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    "argv,said",
    [
        (["mail", "send", "bob", "--mesage", "x"], "no such option: --mesage (did you mean"),
        (["spawn", "--deadline", "5", "--", "true"], "'5' is not a duration"),
        (["spawn", "--env", "NOEQUALS", "--", "true"], "'NOEQUALS' is not KEY=VALUE"),
        (["mail", "wait", "--timeout", "0s"], "'0s' is not a duration"),
        (["mail", "send", "bob", "-m"], "'-m' requires an argument; see bench help mail send"),
    ],
    ids=lambda x: x if isinstance(x, str) else " ".join(x),
)
def test_parser_errors_are_one_line_with_a_code(shared, argv, said):
    r = shared.bench(*argv)
    assert r.rc == 2 and ONE_LINE.match(r.err) and r.err.endswith(" [usage]\n"), r
    assert said in r.err and "Usage:" not in r.err and "Try " not in r.err, r
    assert "see bench help " in r.err, r


def test_a_group_without_its_command_shows_its_help(shared):
    for argv in ([], ["mail"]):
        r = shared.bench(*argv)
        assert r.err.startswith(f"Usage: bench {' '.join(argv)}".rstrip()), r
        assert "Commands:" in r.err and not r.err.startswith("bench: "), r


def test_values_out_of_range_exit_2_whoever_finds_them(shared):
    for argv, code in [
        (["mail", "list", "--limit", "0"], "bad-limit"),  # the daemon finds it
        (["mail", "wait", "--timeout", "0s"], "usage"),  # the parser finds it
        (["mail", "wait", "--timeout", "2h"], "bad-duration"),  # past --wait-max
    ]:
        r = shared.bench(*argv)
        assert r.rc == 2 and ONE_LINE.match(r.err) and f"[{code}]" in r.err, (argv, r)
    r = shared.bench("mail", "wait", "--timeout", "2h")
    assert "at most 1h (got 2h)" in r.err, r


def test_help_lists_every_exit_code(shared):
    from bench_wire.errors import EXIT_CODES, EXIT_INTERRUPTED

    out = shared.bench("help").out
    for code in {0, 1, *EXIT_CODES.values(), EXIT_INTERRUPTED}:
        assert re.search(rf"^\s+{code}\s+\S", out, re.M), (code, out)


# ---------------------------------------------------------------- defects 6-9


def test_job_wait_says_the_outcome_its_reason_and_the_replys_path(shared, who, tmp_path):
    task = tmp_path / "task.md"
    task.write_text("sleep past your deadline")
    shared.ok(
        "spawn", "--name", who, "--mail", str(task), "--reply-to", "operator",
        "--deadline", "1s", "--", "sleep", "600",
    )  # fmt: skip
    r = shared.bench("job", "wait", who, "--timeout", "1m")
    assert r.rc == 0, r
    head = r.out.splitlines()[0]
    assert re.fullmatch(rf"job {who} \(s[0-9a-f]+\) interrupted \(deadline\)(: \S+)?", head), head

    # Once the reply is in the operator's inbox, the answer names it.
    def reply():
        got = shared.ok("mail", "list", "--handle", "operator")["messages"]
        return [x for x in got if x["from"] == who]

    listed = wait_for(reply, 30, "the reply")
    again = shared.bench("job", "wait", who, "--timeout", "10s")
    path = os.path.join(shared.dir, "mail", "operator", "inbox", listed[0]["mail_id"] + ".md")
    assert again.out.splitlines()[0].endswith(f"interrupted (deadline): {path}"), again
    a = shared.ok("job", "wait", who, "--timeout", "10s")
    assert (a["outcome"], a["reason"], a["path"]) == ("interrupted", "deadline", path)


def test_did_you_mean_for_reply_to_is_about_the_reply_to(shared, who):
    for h in ("alice", "bobb", "bob"):
        shared.ok("mail", "send", who + h, "-m", "so the mailbox exists")
    r = shared.bench("mail", "send", who + "bob", "--reply-to", who + "Alice", "-m", "x")
    assert r.rc == 1 and f"reply-to '{who}Alice'" in r.err, r
    assert f"(did you mean {who}alice?)" in r.err, r
    r = shared.bench("mail", "send", who + "carol", "--reply-to", who + "Bob", "-m", "x")
    assert r.rc == 1 and f"(did you mean {who}bob?)" in r.err, r


def test_durations_are_shown_as_durations(shared, tmp_path):
    task = tmp_path / "task.md"
    task.write_text("x")
    r = shared.bench("spawn", "--mail", str(task), "--deadline", "30d", "--", "true")
    assert r.rc == 2 and "[bad-duration]" in r.err, r
    assert "--deadline 30d is out of range" in r.err and "--max-deadline (7d)" in r.err, r
    assert "e+" not in r.err


def test_restart_starts_the_same_command_in_the_same_place(shared, who, tmp_path):
    r = shared.bench("restart", "nobody")
    assert "report" not in r.err and "[no-such-session]" in r.err, r
    here = tmp_path / "work"
    here.mkdir()
    script = "import os; print('in', os.getcwd(), os.environ['COLOUR']); input()"
    shared.ok(
        "spawn", "--name", who, "--cwd", str(here), "--env", "COLOUR=blue", "--rows", "30",
        "--", sys.executable, "-c", script,
    )  # fmt: skip
    first = next(s for s in shared.ok("ps")["sessions"] if s["handle"] == who)
    # Its env's values are not kept: asked for, and nothing is ended meanwhile.
    r = shared.bench("restart", who)
    assert r.rc == 2 and "--env COLOUR" in r.err and "nothing was ended" in r.err, r
    assert shared.ok("ps", who)["sessions"][0]["session"] == first["session"]
    a = shared.ok("restart", who, "--env", "COLOUR=red")
    assert a["session"] != first["session"] and a["handle"] == who
    wait_for(lambda: f"in {here} red" in shared.bench("tail", who).out, 30, "the new one's line")
    now = next(s for s in shared.ok("ps")["sessions"] if s["handle"] == who)
    assert now["launch"]["cwd"] == str(here) and now["launch"]["rows"] == 30
    assert now["argv"] == first["argv"]
    # An exited session, by id, too.
    shared.ok("kill", who)
    a = shared.ok("restart", now["session"], "--env", "COLOUR=green")
    assert a["handle"] == who
    shared.ok("kill", who)


# ---------------------------------------------------------------- frictions


def test_mail_sent_has_a_header_row_and_the_subject(shared, who):
    shared.ok("mail", "send", who, "-s", "the plan", "-m", "x")
    lines = shared.bench("mail", "sent", "--to", who).out.splitlines()
    assert lines[0].split() == ["ID", "TO", "STATE", "AT", "SUBJECT"], lines
    assert lines[1].split()[1] == who and lines[1].endswith("the plan"), lines
    assert shared.ok("mail", "sent", "--to", who)["messages"][0]["subject"] == "the plan"


def test_mail_reply_json_has_no_request_id(shared, who):
    sent = shared.ok("mail", "send", "operator", "-m", "ask")
    a = shared.ok("mail", "reply", sent["mail_id"], "-m", "answer")
    assert "id" not in a and all("id" not in s for s in a["sent"]), a
    assert a["sent"][0]["mail_id"]
    assert "id" not in shared.ok("mail", "send", who, "-m", "x")  # the fast path's too


def test_events_text_shows_times_and_leaves_empty_fields_out(shared, who, tmp_path):
    since = shared.last_seq()
    r = shared.bench("mail", "wait", "--from", "operator", "--timeout", "1s")
    assert "[would-deadlock]" in r.err, r
    after = ["--after", str(since)]
    line = shared.bench("events", *after, "--kind", "wait/refused").out.splitlines()[-1]
    assert "cycle=operator,operator" in line and "limit=" not in line, line
    task = tmp_path / "task.md"
    task.write_text("x")
    shared.ok("spawn", "--name", who, "--mail", str(task), "--deadline", "1s", "--", "sleep", "60")
    shared.wait_event("job/deadline", lambda e: e["handle"] == who, since=since)
    line = shared.bench("events", *after, "--kind", "job/deadline", "--session", who).out
    line = line.splitlines()[-1]
    assert re.search(r" deadline=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}( |$)", line), line
    for text in shared.bench("events").out.splitlines():
        assert not re.search(r'\w=(""|\s|$)', text), text
        assert not re.search(r"=1\d{12}\b", text), text  # no epoch milliseconds


def test_a_send_to_operator_does_not_say_no_live_session(shared, who):
    r = shared.bench("mail", "send", "operator", "-m", "hi")
    assert r.rc == 0 and "no live session" not in r.out, r
    r = shared.bench("mail", "send", who, "-m", "hi")
    assert "no live session" in r.out or "new-mailbox" in r.out, r


def test_tail_n_prints_the_last_lines(shared, who):
    spawn(shared, sys.executable, "-c", "[print('line', i) for i in range(50)]; input()", name=who)
    wait_for(lambda: "line 49" in shared.bench("tail", who).out, 30, "the 50 lines")
    out = shared.bench("tail", "-n", "3", who).out
    assert [x.strip() for x in out.splitlines()] == ["line 47", "line 48", "line 49"], out
    screen = shared.bench("tail", who, "--screen", "-n", "2").out.splitlines()
    assert [x.strip() for x in screen] == ["line 48", "line 49"], screen
    shared.ok("kill", who)


def test_mail_rm_says_nothing_is_deleted(shared):
    r = shared.bench("mail", "rm", "20261130T045611.123Z-0001")
    assert r.rc == 2 and ONE_LINE.match(r.err), r
    assert "nothing is deleted" in r.err and "bench mail read ID" in r.err, r


def test_a_mistyped_preset_gets_a_suggestion(shared):
    before = {s["session"] for s in shared.ok("ps", "-a")["sessions"]}
    r = shared.bench("spawn", "--agent", "claudee", "--", "true")
    assert r.rc == 1 and "(did you mean claude?)" in r.err, r
    assert_refused(
        shared.bench("spawn", "--agent", "claudee", "--json", "--", "true"), "bad-request"
    )
    # Nothing was started (the module's other tests may have left sessions of their own).
    assert {s["session"] for s in shared.ok("ps", "-a")["sessions"]} <= before
