"""The command line people expect, through the real `bench` (and `benchd`) processes:
the exit-code table, global options, ps/tail/events habits, help, completion, the
service unit, colour, and attach giving the session its size back."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import click
import ptyprocess
import pytest

from bench_cli import cli as cli_main
from tests.conformance.test_sessions import read_pty, wait_screen
from tests.conftest import BENCH, BIN, ROOT, spawn, standin_argv, wait_for

# About the `bench` process: every command here runs as one (tests/support/inproc.py).
BENCH_CLI = "process"

BENCHD = os.path.join(BIN, "benchd")


def in_pty(d, *argv, env=None, rows=30, cols=100):
    e = d.env(**(env or {}))
    return ptyprocess.PtyProcess.spawn([BENCH, *argv], env=e, dimensions=(rows, cols))


def finish(p) -> tuple[int, bytes]:
    out = read_pty(p)
    p.wait()
    return p.exitstatus, out


# ---------------------------------------------------------------- exit codes


def test_usage_errors_exit_2_whoever_finds_them(shared, make_daemon):
    # click's: an unknown option
    r = shared.bench("ps", "--bogus")
    assert r.rc == 2 and r.err == "bench: no such option: --bogus; see bench help ps [usage]\n", r
    # bench's: a daemon option out of range, before any daemon starts
    other = make_daemon(start=False)
    r = other.bench("up", "--dir", other.dir + "x", "--idle-gate", "-1")
    assert r.rc == 2 and "--idle-gate must not be negative" in r.err, r
    assert not os.path.exists(other.dir + "x")
    # bench's: an event time it cannot read
    r = shared.bench("events", "--since", "yesterday-ish")
    assert r.rc == 2 and "--after SEQ" in r.err, r


def test_a_missing_body_on_a_terminal_is_a_usage_error(shared, who):
    p = in_pty(shared, "mail", "send", who)
    rc, out = finish(p)
    assert rc == 2 and b"give the body with -m BODY" in out and b"[usage]" in out, out
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))


def test_attach_without_a_terminal_is_refused_with_2(shared, who):
    spawn(shared, *standin_argv(), name=who)
    r = shared.bench("attach", who)
    assert r.rc == 2 and "needs a terminal" in r.err and "[usage]" in r.err, r
    assert r.out == ""


@pytest.mark.parametrize("argv", [["events", "-f"], ["tail", "-f", "looper"]], ids=" ".join)
def test_ctrl_c_exits_130_and_prints_nothing(shared, who, argv):
    spawn(shared, "bash", "-c", "echo started; exec sleep 60", name=who)
    wait_screen(shared, who, "started")
    p = subprocess.Popen(
        [BENCH, *(who if x == "looper" else x for x in argv)],
        env=shared.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        first = p.stdout.readline()  # it is streaming: the history came out
        assert first, "no output before Ctrl-C"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (p.returncode, err)
    assert err == b"", err  # no "Aborted!", no traceback


def test_refused_is_1_and_no_daemon_is_3(shared, make_daemon):
    r = shared.bench("kill", "nobody-here")
    assert r.rc == 1 and "[no-such-session]" in r.err, r
    nod = make_daemon(start=False)
    r = nod.bench("status", "--dir", nod.dir + "-none")
    assert r.rc == 3 and "bench up" in r.err, r


def test_up_with_other_options_says_which_and_offers_restart(shared):
    r = shared.bench("up", "--idle-gate", "1.5", "--wake-burst", "6")
    assert r.rc == 1 and "[options-differ]" in r.err, r
    assert "--idle-gate 1.5 (running: 0.3)" in r.err and "--wake-burst" not in r.err, r
    assert "bench up --restart" in r.err
    same = shared.bench("up", "--idle-gate", "0.3")
    assert same.rc == 0 and "already running" in same.out, same


def test_up_restart_applies_the_new_options():
    from tests.conftest import short_tmpdir

    d = short_tmpdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    try:
        first = subprocess.run(
            [BENCH, "up", "--dir", d, "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        assert first.returncode == 0, first
        again = subprocess.run(
            [BENCH, "up", "--dir", d, "--restart", "--idle-gate", "1.5", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert again.returncode == 0, again
        a = json.loads(again.stdout)
        assert a["reactor"]["idle_gate"] == 1.5
        assert a["pid"] != json.loads(first.stdout)["pid"]
    finally:
        subprocess.run([BENCH, "down", "--dir", d], env=env, capture_output=True, timeout=60)
        subprocess.run(["rm", "-rf", d])


# ---------------------------------------------------------------- global options


def test_dir_and_json_before_the_subcommand(shared, who):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    for argv in (
        ["--dir", shared.dir, "--json", "status"],
        ["--json", "--dir", shared.dir, "mail", "send", who, "-m", "hi"],
        ["--dir", shared.dir, "mail", "list", "--handle", who, "--json"],
    ):
        r = subprocess.run([BENCH, *argv], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (argv, r)
        assert json.loads(r.stdout)["ok"] is True
    # After the subcommand wins.
    r = subprocess.run(
        [BENCH, "--dir", "/nonexistent/b", "status", "--dir", shared.dir],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and shared.dir in r.stdout, r


# ---------------------------------------------------------------- mail list


def test_paging_hint_carries_the_options_that_shaped_the_listing(shared, who):
    for i in range(12):
        shared.ok("mail", "send", who, "-m", f"m{i}")
    r = shared.bench("mail", "list", "--handle", who, "--limit", "5", "--state", "all")
    assert r.rc == 0, r
    foot = r.out.strip().splitlines()[-1]
    assert foot.startswith(
        f"5 of 12 messages for {who}; more: bench mail list --handle {who} --state all "
        "--limit 5 --cursor "
    ), foot
    hint = foot.split("more: bench ", 1)[1].split()
    nxt = shared.bench(*hint)
    assert nxt.rc == 0 and f"5 of 12 messages for {who}" in nxt.out, nxt  # not the operator's


def test_mail_list_has_a_header_human_sizes_and_stays_aligned(daemon):
    long = "a-very-long-handle-of-an-agent.with.dots"
    spawn(
        daemon,
        "bash",
        "-c",
        'bench mail send operator -m "$(head -c 3000 /dev/zero | '
        "tr '\\0' x)\" -s big; bench mail send operator -m hi -s small; sleep 30",
        name=long,
    )
    wait_for(lambda: daemon.ok("mail", "list")["total"] == 2, what="two messages")
    daemon.ok("mail", "send", "operator", "-m", "x", "-s", "mine")
    lines = daemon.bench("mail", "list").out.splitlines()
    assert lines[0].split() == ["ID", "STATE", "FROM", "SIZE", "SUBJECT"]
    rows = lines[1:4]
    assert "2.9 KiB" in rows[0] and "2 B" in rows[1] and "1 B" in rows[2], rows
    # Every subject starts in the same column as the header's SUBJECT.
    col = lines[0].index("SUBJECT")
    assert [r[col:] for r in rows] == ["big", "small", "mine"], lines


# ---------------------------------------------------------------- sessions


def test_ps_live_by_default_all_quiet_by_id_and_prune(daemon):
    old = spawn(daemon, "bash", "-c", "exit 4", name="w")
    daemon.wait_event("session/exited", lambda e: e["session"] == old["session"])
    new = spawn(daemon, "sleep", "60", name="w")  # the handle is reused
    assert [s["session"] for s in daemon.ok("ps")["sessions"]] == [new["session"]]
    every = daemon.ok("ps", "-a")["sessions"]
    assert [s["session"] for s in every] == [new["session"], old["session"]]
    assert daemon.bench("ps", "-q").out == "w\n"
    past = daemon.ok("ps", old["session"])["sessions"]
    assert len(past) == 1 and past[0]["exit"] == 4
    text = daemon.bench("ps", old["session"]).out
    assert old["session"] in text and "exited" in text
    daemon.ok("mail", "send", "w", "-m", "kept")
    pruned = daemon.ok("ps", "--prune")
    assert pruned["forgotten"] == 1
    assert [s["session"] for s in daemon.ok("ps", "-a")["sessions"]] == [new["session"]]
    r = daemon.bench("ps", old["session"])
    assert r.rc == 1 and "[no-such-session]" in r.err, r
    assert daemon.ok("mail", "list", "--handle", "w")["total"] == 1  # the mailbox stays


def test_tail_and_events_reach_a_past_session_by_id(shared, who):
    old = spawn(shared, "bash", "-c", "echo first-life; exit 0", name=who)
    shared.wait_event("session/exited", lambda e: e["session"] == old["session"])
    new = spawn(shared, "bash", "-c", "echo second-life; exec sleep 60", name=who)
    wait_screen(shared, who, "second-life")
    r = shared.bench("tail", old["session"])
    assert r.rc == 0 and "first-life" in r.out and "second-life" not in r.out, r
    assert "second-life" in shared.bench("tail", who).out
    evs = [
        json.loads(x)
        for x in shared.bench("events", "--session", old["session"], "--json").out.splitlines()
    ]
    assert {e["kind"] for e in evs} == {"session/spawned", "session/exited"}
    assert all(e["session"] == old["session"] for e in evs)
    r = shared.bench("tail", "never-was")
    assert r.rc == 1 and "no session, live or exited" in r.err, r
    assert new["session"] != old["session"]


def test_detach_gives_the_session_its_own_size_back(shared, who):
    spawn(shared, *standin_argv(), name=who)
    wait_screen(shared, who, "standin>")

    def rows():
        r = shared.bench("tail", who, "--screen", "--json")
        return len(json.loads(r.out.splitlines()[0])["lines"])  # a screen frame, then end

    assert rows() == 40
    p = in_pty(shared, "attach", who, rows=25, cols=90)
    try:
        read_pty(p, b"detach with Ctrl-]")
        assert rows() == 25
        p.write(b"\x1d")
        rc, _ = finish(p)
        assert rc == 0
    finally:
        if p.isalive():
            p.terminate(force=True)
    wait_for(lambda: rows() == 40, what="the session's own 40 rows back")


# ---------------------------------------------------------------- events


def test_events_lines_have_date_time_and_plain_fields(shared, who):
    spawn(shared, "bash", "-c", "exit 0", name=who)
    shared.wait_event("session/exited", lambda e: e["handle"] == who)
    lines = shared.bench("events").out.splitlines()
    stamp = re.compile(r"^\s*\d+  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}  \S")
    assert lines and all(stamp.match(x) for x in lines), lines
    spawned = next(x for x in lines if "session/spawned" in x and f" handle={who} " in x)
    assert 'argv=bash,-c,"exit 0"' in spawned, spawned
    text = "\n".join(lines)
    assert "None" not in text and "['" not in text, text


def test_events_tail_since_and_after(daemon):
    for i in range(5):
        daemon.ok("mail", "send", "t", "-m", str(i))
    every = [json.loads(x) for x in daemon.bench("events", "--json").out.splitlines()]
    last2 = [json.loads(x) for x in daemon.bench("events", "--tail", "2", "--json").out.split()]
    assert last2 == every[-2:]
    after = [
        json.loads(x)
        for x in daemon.bench("events", "--after", str(every[-3]["seq"]), "--json").out.split()
    ]
    assert after == every[-2:]
    recent = daemon.bench("events", "--since", "10m", "--json").out.split()
    assert len(recent) == len(every)
    future = daemon.bench("events", "--since", "2999-01-01T00:00", "--json")
    assert future.rc == 0 and future.out == ""
    two = [json.loads(x) for x in daemon.bench("events", "--limit", "2", "--json").out.split()]
    assert two == every[:2]
    # With -f, --limit ends the stream once that many were shown.
    one = daemon.bench("events", "-f", "--limit", "1", "--kind", "mail/sent", "--json", timeout=30)
    assert (
        one.rc == 0
        and [json.loads(x) for x in one.out.split()]
        == [e for e in every if e["kind"] == "mail/sent"][:1]
    )


def test_events_tail_then_follow(daemon):
    daemon.ok("mail", "send", "f", "-m", "before")
    p = subprocess.Popen(
        [BENCH, "events", "--tail", "1", "-f", "--json"],
        env=daemon.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        first = json.loads(p.stdout.readline())
        assert first["kind"] == "mail/sent" and first["to"] == "f"
        daemon.ok("mail", "send", "f2", "-m", "after")
        nxt = json.loads(p.stdout.readline())
        assert nxt["kind"] == "mail/sent" and nxt["to"] == "f2"
        p.send_signal(signal.SIGINT)
        p.wait(30)
        assert p.returncode == 130
    finally:
        if p.poll() is None:
            p.kill()
        p.stdout.close()
        p.stderr.close()


# ---------------------------------------------------------------- help


def test_help_command_version_and_benchd_version():
    h = subprocess.run([BENCH, "help", "mail", "send"], capture_output=True, text=True)
    direct = subprocess.run([BENCH, "mail", "send", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and h.stdout == direct.stdout
    assert "Examples:" in h.stdout and "--key ping-42" in h.stdout
    top = subprocess.run([BENCH, "help"], capture_output=True, text=True).stdout
    assert "Exit codes:" in top and "130" in top
    assert "..." not in top.split("Commands:")[1], top  # summaries are whole
    bad = subprocess.run([BENCH, "help", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no such command" in bad.stderr
    for prog in (BENCH, BENCHD):
        v = subprocess.run([prog, "--version"], capture_output=True, text=True)
        assert v.returncode == 0 and re.search(r"\d+\.\d+\.\d+", v.stdout), (prog, v)


def _commands(group, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


@pytest.mark.parametrize("path", [p for p, _ in _commands(cli_main.cli)], ids=" ".join)
def test_every_option_is_described(path):
    r = subprocess.run([BENCH, *path, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r
    opts = r.stdout.split("Options:", 1)[1].split("Examples:", 1)[0]
    entries = re.split(r"\n  (?=-)", "\n" + opts.rstrip())
    for entry in entries[1:]:
        assert len(entry.split(None, 1)) == 2 and re.search(r"\s{2,}\S", entry), (path, entry)


def readme_examples() -> dict[str, list[str]]:
    """Code lines of the README and of docs/ that run a bench command, by command: what
    each help shows."""
    pages = [Path(ROOT, "README.md"), *sorted(Path(ROOT, "docs").glob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    out: dict[str, list[str]] = {}
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            words = cmd.split()
            if len(words) < 2 or words[0] != "bench" or "[" in cmd:
                continue
            group = words[1] in ("mail", "service", "nodes", "job")
            sub = len(words) > 2 and not words[2].startswith("-")
            key = " ".join(words[1:3]) if group and sub else words[1]
            out.setdefault(key, []).append(cmd)
    return out


def test_readme_examples_are_in_each_commands_help():
    examples = readme_examples()
    assert {"up", "spawn", "ps", "tail", "mail send", "events", "service install"} <= set(examples)
    for key, lines in examples.items():
        r = subprocess.run([BENCH, *key.split(), "--help"], capture_output=True, text=True)
        assert r.returncode == 0, (key, r)
        for line in lines:
            assert line in r.stdout, (key, line)


# ---------------------------------------------------------------- completion


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_for_each_shell(shell):
    r = subprocess.run([BENCH, "completion", shell], capture_output=True, text=True)
    assert r.returncode == 0 and "_BENCH_COMPLETE" in r.stdout, r


def test_a_live_handle_completes(shared, who):
    # Handles of this test's own (the module's other tests may have live sessions).
    for h in ("alice", "albert", "bob"):
        spawn(shared, "sleep", "60", name=who + h)
    words = f"bench tail {who}al"
    env = shared.env(_BENCH_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD="2")
    r = subprocess.run([BENCH], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    values = sorted(line.split(",", 1)[1] for line in r.stdout.splitlines())
    assert values == [who + "albert", who + "alice"], r.stdout
    env["COMP_WORDS"], env["COMP_CWORD"] = f"bench mail send {who}b", "3"
    r = subprocess.run([BENCH], env=env, capture_output=True, text=True, timeout=30)
    assert [line.split(",", 1)[1] for line in r.stdout.splitlines()] == [who + "bob"], r.stdout
    for h in ("alice", "albert", "bob"):
        shared.ok("kill", who + h)


# ---------------------------------------------------------------- service unit


def test_service_install_print_is_the_unit(bench_dir):
    r = subprocess.run(
        [BENCH, "service", "install", "--print", "--dir", bench_dir, "--idle-gate", "1.5"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r
    unit = r.stdout
    sections = re.findall(r"^\[(\w+)\]$", unit, flags=re.M)
    assert sections == ["Unit", "Service", "Install"]
    fields = dict(
        line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#")
    )
    assert fields["ExecStart"] == f"{BENCH} daemon --dir {bench_dir} --idle-gate 1.5"
    assert fields["Environment"] == f"BENCH_DIR={bench_dir}"
    assert fields["Type"] == "simple" and fields["Restart"] == "on-failure"
    assert fields["KillMode"] == "mixed" and fields["WantedBy"] == "default.target"
    assert f"{bench_dir}/benchd.sock" in unit and "journalctl --user -u bench" in unit
    assert "systemctl --user status bench" in unit


def test_service_install_without_systemctl_writes_it_and_says_so(bench_dir, tmp_path):
    nobin = tmp_path / "bin"
    nobin.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "XDG_"))}
    env.update(PATH=str(nobin), XDG_CONFIG_HOME=str(tmp_path / "config"))
    r = subprocess.run(
        [sys.executable, "-m", "bench_cli.entry", "service", "install", "--dir", bench_dir],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert r.returncode == 0, r
    path = tmp_path / "config" / "systemd" / "user" / "bench.service"
    assert r.stdout.startswith(f"wrote {path}\n"), r
    assert "systemctl was not found" in r.stdout and "bench up" in r.stdout
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench_cli.entry",
            "service",
            "install",
            "--print",
            "--dir",
            bench_dir,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert path.read_text() == printed.stdout


# ---------------------------------------------------------------- colour


def test_colour_only_on_a_terminal_and_never_with_no_color_or_json(shared, who):
    spawn(shared, "sleep", "60", name=who)
    rc, out = finish(in_pty(shared, "ps", who))
    assert rc == 0 and b"\x1b[32mrunning" in out, out
    rc, out = finish(in_pty(shared, "ps", who, env={"NO_COLOR": "1"}))
    assert rc == 0 and b"\x1b[" not in out and b"running" in out, out
    rc, out = finish(in_pty(shared, "ps", "--json"))
    assert rc == 0 and b"\x1b[" not in out, out
    assert "\x1b[" not in shared.bench("ps").out  # a pipe is not a terminal
    shared.ok("kill", who)
