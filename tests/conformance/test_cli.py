"""The `bench` CLI as a user meets it: exit codes, errors, up/down."""

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.conftest import BENCH, BIN, Benchd, short_tmpdir, wait_for
from tests.support.refusal import assert_refused

# About the `bench` process: every command here runs as one (tests/support/inproc.py).
BENCH_CLI = "process"

BENCHD = os.path.join(BIN, "benchd")


def run(
    *argv: str, env_dir: str | None = None, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    if env_dir is not None:
        env["BENCH_DIR"] = env_dir
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def no_traceback(p) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p


def pid_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is gone
    except FileNotFoundError:
        return True


@pytest.fixture
def nodaemon(make_daemon) -> Benchd:
    """A BENCH_DIR with nothing serving it."""
    return make_daemon(start=False)


# ---------------------------------------------------------------- no daemon


@pytest.mark.parametrize(
    "argv",
    [
        ["mail", "send", "x", "-m", "y"],
        ["status"],
        ["mail", "list"],
        ["mail", "read"],
        ["events"],
        ["ps"],
    ],
    ids=" ".join,
)
def test_no_daemon_exit_3_one_line(nodaemon, argv):
    start = time.monotonic()
    r = nodaemon.bench(*argv, timeout=30)
    assert time.monotonic() - start < 20  # never a hang
    assert r.rc == 3, r
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert nodaemon.dir in lines[0]
    assert "bench up" in lines[0]
    assert r.out == ""


def test_no_daemon_with_dir_flag(bench_dir):
    r = run(BENCH, "mail", "send", "x", "-m", "y", "--dir", bench_dir)
    assert r.returncode == 3
    assert bench_dir in r.stderr and "bench up" in r.stderr
    no_traceback(r)


def test_no_daemon_json(nodaemon):
    r = nodaemon.bench("mail", "send", "x", "-m", "y", "--json")
    assert r.rc == 3
    a = json.loads(r.out)
    assert a["ok"] is False
    assert_refused(a, "no-daemon")
    assert nodaemon.dir in a["error"]["message"]
    assert "Traceback" not in r.err


def test_no_daemon_with_a_stale_socket_file(nodaemon):
    with open(os.path.join(nodaemon.dir, "benchd.sock"), "w") as f:
        f.write("not a socket")
    r = nodaemon.bench("status")
    assert r.rc == 3 and "bench up" in r.err
    assert "Traceback" not in r.err


# ---------------------------------------------------------------- every command: --dir, --json


COMMANDS = [
    ["status"],
    ["ps"],
    ["events"],
    ["down"],
    ["mail", "send", "x", "-m", "y"],
    ["mail", "list"],
    ["mail", "read"],
    ["tail", "h"],
    ["type", "h", "t"],
    ["kill", "h"],
    ["report", "hi"],
    ["attach", "h"],
    ["spawn", "--name", "h"],  # CMD after the options below
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_takes_dir_and_json(bench_dir, argv):
    tail = ["--", "sh"] if argv[0] == "spawn" else []
    # BENCH_DIR points elsewhere: only --dir can name bench_dir in the answer.
    r = run(BENCH, *argv, "--dir", bench_dir, "--json", *tail, env_dir="/nonexistent/bench")
    if argv == ["down"]:  # idempotent: no daemon is what was asked for
        assert r.returncode == 0 and json.loads(r.stdout)["bench_dir"] == bench_dir, r
        return
    if argv[0] == "attach":  # refused before any connection: stdin is not a terminal
        assert r.returncode == 2, r
        assert_refused(json.loads(r.stdout), "usage")
        return
    assert r.returncode == 3, r
    no_traceback(r)
    a = json.loads(r.stdout)
    assert a == {"ok": False, "error": {"code": "no-daemon", "message": a["error"]["message"]}}
    assert bench_dir in a["error"]["message"]


def test_help_lists_dir_and_json_everywhere():
    for argv in (
        ["status"],
        ["up"],
        ["down"],
        ["ps"],
        ["events"],
        ["mail", "send"],
        ["mail", "list"],
        ["mail", "read"],
        ["spawn"],
        ["tail"],
        ["type"],
        ["kill"],
        ["report"],
    ):
        r = run(BENCH, *argv, "--help")
        assert r.returncode == 0, r
        assert "--dir" in r.stdout and "--json" in r.stdout, argv


# ---------------------------------------------------------------- errors


def test_refusal_json_and_human(shared):
    r = shared.bench("mail", "send", "Bad/Handle", "-m", "x", "--json")
    assert r.rc == 1
    a = json.loads(r.out)
    assert_refused(a, "bad-handle")
    assert isinstance(a["error"]["message"], str) and a["error"]["message"]
    assert "Traceback" not in r.err
    r = shared.bench("mail", "send", "Bad/Handle", "-m", "x")
    assert r.rc == 1 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and "bad-handle" in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize(
    "argv",
    [
        ["mail", "send", "x", "--bogus"],
        ["mail", "send", "x", "-m", "y", "--bogus=1"],
        ["nosuchcommand"],
        ["status", "--bogus"],
        ["mail", "list", "--limit", "abc"],
        ["mail", "list", "--state", "bogus"],
        ["mail", "send"],
        ["mail", "send", "a", "b", "-m", "x"],
        ["mail", "read", "a", "b"],
        ["events", "--since", "x"],
        ["spawn"],
    ],
    ids=" ".join,
)
def test_bad_usage_exit_2_without_traceback(shared, argv):
    r = shared.bench(*argv)
    assert r.rc == 2, r
    assert "Traceback" not in r.err
    assert r.err.strip()
    assert shared.ok("mail", "list", "--handle", "x")["total"] == 0  # nothing was sent


# ---------------------------------------------------------------- socket path too long


@pytest.fixture
def long_dir():
    base = short_tmpdir()
    d = os.path.join(base, "d" * (120 - len(base) - 1))
    assert len(d) == 120
    yield d
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "argv", [["status"], ["mail", "send", "x", "-m", "y"], ["up"], ["mail", "list"]], ids=" ".join
)
def test_socket_path_too_long_cli(long_dir, argv):
    r = run(BENCH, *argv, "--dir", long_dir)
    assert r.returncode == 2, r
    no_traceback(r)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1
    assert "107" in msg or "108" in msg
    assert "socket" in msg
    r = run(BENCH, *argv, env_dir=long_dir)
    assert r.returncode == 2, r
    no_traceback(r)
    r = run(BENCH, *argv, "--dir", long_dir, "--json")
    assert r.returncode == 2
    assert_refused(json.loads(r.stdout), "socket-path-too-long")


def test_socket_path_too_long_benchd(long_dir):
    r = run(BENCHD, "--dir", long_dir, timeout=30)
    assert r.returncode == 2, r
    no_traceback(r)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1
    assert "107" in msg or "108" in msg
    assert not os.path.exists(long_dir)  # nothing created for a directory it cannot serve


# ---------------------------------------------------------------- up / down


def test_up_down():
    d = short_tmpdir("bu")
    try:
        r = run(BENCH, "up", "--dir", d, "--json", timeout=60)
        assert r.returncode == 0, r
        a = json.loads(r.stdout)
        pid = a["pid"]
        assert os.path.realpath(a["bench_dir"]) == os.path.realpath(d)
        # `up` returned only once the daemon answers: no waiting here.
        s = run(BENCH, "status", "--dir", d, "--json")
        assert s.returncode == 0 and json.loads(s.stdout)["pid"] == pid
        again = run(BENCH, "up", "--dir", d, "--json")
        assert again.returncode == 0 and json.loads(again.stdout)["pid"] == pid
        human = run(BENCH, "up", "--dir", d)
        assert human.returncode == 0 and str(pid) in human.stdout
        sent = run(BENCH, "mail", "send", "bob", "-m", "hi", "--dir", d)
        assert sent.returncode == 0
        down = run(BENCH, "down", "--dir", d)
        assert down.returncode == 0, down
        assert not os.path.exists(os.path.join(d, "benchd.sock"))
        wait_for(lambda: pid_gone(pid), 30, "benchd to exit after bench down")
        s = run(BENCH, "status", "--dir", d)
        assert s.returncode == 3
        # The mail survived the stop.
        up2 = run(BENCH, "up", "--dir", d, "--json")
        assert up2.returncode == 0 and json.loads(up2.stdout)["pid"] != pid
        listed = run(BENCH, "mail", "list", "--handle", "bob", "--dir", d, "--json")
        assert json.loads(listed.stdout)["total"] == 1
    finally:
        run(BENCH, "down", "--dir", d)
        shutil.rmtree(d, ignore_errors=True)


def test_up_with_daemon_options():
    d = short_tmpdir("bu")
    try:
        r = run(BENCH, "up", "--dir", d, "--idle-gate", "1.5", "--wake-burst", "3", "--json")
        assert r.returncode == 0, r
        a = json.loads(r.stdout)
        assert a["reactor"]["idle_gate"] == 1.5 and a["reactor"]["wake_burst"] == 3
    finally:
        run(BENCH, "down", "--dir", d)
        shutil.rmtree(d, ignore_errors=True)


def test_down_without_daemon_is_a_no_op_like_up(nodaemon):
    r = nodaemon.bench("down")
    assert r.rc == 0 and r.out == f"no benchd was running for {nodaemon.dir}\n", r
    j = nodaemon.bench("down", "--json")
    assert j.rc == 0 and j.json == {
        "ok": True,
        "type": "stop",
        "running": False,
        "bench_dir": nodaemon.dir,
    }, j


# ---------------------------------------------------------------- mail commands, human output


def test_send_body_from_stdin(shared, who):
    r = shared.bench("mail", "send", who, "-s", "piped", input="from\nstdin\n")
    assert r.rc == 0, r
    got = shared.ok("mail", "read", "--handle", who)
    assert got["body"] == "from\nstdin\n" and got["subject"] == "piped"


def test_send_empty_stdin_is_refused_but_an_explicit_empty_body_is_not(shared, who):
    # An agent's shell often has an empty, non-tty stdin: sending nothing by accident is
    # refused; an empty body must be asked for with -m ''.
    r = shared.bench("mail", "send", who, input="")
    assert r.rc == 2 and "standard input was empty" in r.err and "Traceback" not in r.err
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))
    assert shared.ok("mail", "send", who, "-m", "")["duplicate"] is False
    assert shared.ok("mail", "read", "--handle", who)["body"] == ""


def test_human_outputs_mention_id_and_path(shared, who):
    r = shared.bench("mail", "send", who, "-s", "subj", "-m", "hello")
    assert r.rc == 0
    a = shared.ok("mail", "list", "--handle", who)
    mail_id = a["messages"][0]["mail_id"]
    path = os.path.join(shared.dir, "mail", who, "inbox", mail_id + ".md")
    assert mail_id in r.out and path in r.out
    assert "no live session" in r.out
    dup_key = shared.bench("mail", "send", who, "-m", "x", "--key", f"{who}-k1")
    dup = shared.bench("mail", "send", who, "-m", "x", "--key", f"{who}-k1")
    assert dup.rc == 0 and "already" in dup.out
    assert dup_key.out.split()[1] in dup.out  # the first id
    lst = shared.bench("mail", "list", "--handle", who)
    assert lst.rc == 0 and mail_id in lst.out and "subj" in lst.out
    rd = shared.bench("mail", "read", mail_id, "--handle", who)
    assert rd.rc == 0
    assert mail_id in rd.out and "hello" in rd.out
    assert os.path.join(shared.dir, "mail", who, "read", mail_id + ".md") in rd.out
    st = shared.bench("status")
    assert st.rc == 0 and shared.dir in st.out and str(shared.proc.pid) in st.out
    empty = shared.bench("mail", "list", "--handle", f"{who}n")
    assert empty.rc == 0 and f"{who}n" in empty.out


def test_json_answers_carry_the_contract_fields(shared, who):
    s = shared.ok("mail", "send", who, "-s", "x", "-m", "y")
    assert {"mail_id", "path", "to", "live", "duplicate"} <= set(s)
    lst = shared.ok("mail", "list", "--handle", who)
    assert {"messages", "total", "cap", "truncated"} <= set(lst)
    assert {"mail_id", "from", "subject", "date", "state"} <= set(lst["messages"][0])
    rd = shared.ok("mail", "read", "--handle", who)
    assert {"mail_id", "from", "to", "subject", "date", "body", "path"} <= set(rd)
    ps = shared.ok("ps")
    assert ps["sessions"] == []
    st = shared.ok("status")
    assert {"version", "pid", "bench_dir", "caps"} <= set(st)


def test_bench_dir_from_env_and_flag_agree(shared):
    a = shared.ok("status")
    b = run(BENCH, "status", "--dir", shared.dir, "--json", env_dir="/nonexistent/elsewhere")
    assert b.returncode == 0 and json.loads(b.stdout)["pid"] == a["pid"]
