"""Sessions the kernel keeps apart (benchd --isolation): what a session's program can
reach from inside its sandbox, tried as a prompt-injected agent would.

The tests that need the sandbox skip, with the reason the daemon gives, where the
kernel cannot make the namespaces; the fallback (isolation off) is tested everywhere.
"""

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from bench_wire.errors import WireError
from benchd.runtime import sandbox
from tests.support.daemon import Benchd
from tests.support.wait import wait_for

# Run inside the attacker's session: everything it can find, as JSON in $OUT.
SNOOP = r"""
import glob, json, os, subprocess
d = os.environ["BENCH_DIR"]
found = {"tokens": [], "foreign_mail": [], "state_files": [], "pids": []}
for path in glob.glob("/proc/[0-9]*/environ"):
    found["pids"].append(int(path.split("/")[2]))
    try:
        env = open(path, "rb").read().split(b"\0")
    except OSError:
        continue
    for kv in env:
        if kv.startswith(b"BENCH_TOKEN="):
            found["tokens"].append(kv.split(b"=", 1)[1].decode())
for path in glob.glob(f"{d}/mail/victim/*/*"):
    try:
        found["foreign_mail"].append(open(path).read())
    except OSError:
        pass
for name in ("index.sqlite", "events.jsonl", "benchd.log", "jobs", "journal"):
    if os.path.exists(os.path.join(d, name)):
        found["state_files"].append(name)
found["listing"] = sorted(os.listdir(d))
found["own"] = [open(p).read() for p in glob.glob(f"{d}/mail/attacker/inbox/*")]
r = subprocess.run(["bench", "mail", "send", "operator", "-m", "from inside"],
                   capture_output=True, text=True)
found["send"] = [r.returncode, r.stderr]
try:
    open(os.path.join(d, "mail", "attacker", "inbox", "forged.md"), "w").write("x")
    found["wrote_own_box"] = True
except OSError:
    found["wrote_own_box"] = False
r = subprocess.run(["bench", "spawn", "--no-sandbox", "--mail", "-", "--", "true"],
                   input="task", capture_output=True, text=True)
found["no_sandbox"] = [r.returncode, r.stderr]
with open(os.environ["OUT"] + ".tmp", "w") as f:
    json.dump(found, f)
os.rename(os.environ["OUT"] + ".tmp", os.environ["OUT"])
"""


def _shows(d: Benchd, handle: str, text: str) -> bool:
    return text in d.bench("tail", handle).out


def _isolation(d: Benchd) -> dict:
    return d.ok("status")["caps"]


@pytest.fixture
def sandboxed(daemon):
    caps = _isolation(daemon)
    if caps["isolation"] != "on":
        pytest.skip(f"the sandbox cannot run here: {caps['isolation_note']}")
    return daemon


def _token_of(pid: int) -> str:
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = f.read().split(b"\0")
    return next(kv.split(b"=", 1)[1].decode() for kv in env if kv.startswith(b"BENCH_TOKEN="))


def _snoop(d: Benchd, tmp_path, no_sandbox: bool = False) -> dict:
    victim = d.ok("spawn", "--name", "victim", "--", "sleep", "600")
    d.ok("mail", "send", "victim", "-m", "the victim's secret")
    d.ok("mail", "send", "attacker", "-m", "the attacker's own mail")
    out = tmp_path / "found.json"
    script = tmp_path / "snoop.py"
    script.write_text(SNOOP)
    flags = ["--no-sandbox"] if no_sandbox else []
    d.ok(
        "spawn", "--name", "attacker", *flags, "--env", f"OUT={out}",
        "--", sys.executable, str(script),
    )  # fmt: skip
    found = json.loads(wait_for(lambda: out.exists() and out.read_text(), 60, "the snoop"))
    found["victim_token"] = _token_of(victim["pid"])
    return found


def test_a_sandboxed_session_reaches_only_its_own(sandboxed, tmp_path):
    found = _snoop(sandboxed, tmp_path)
    # No other session's token: it sees only its own processes (its PID namespace).
    assert found["victim_token"] not in found["tokens"]
    assert len(set(found["tokens"])) <= 1, found["tokens"]
    assert len(found["pids"]) <= 10, found["pids"]  # its own processes only
    # No other mailbox, no index, journal or event log: BENCH_DIR holds the socket and
    # its own mailbox only, and that read-only.
    assert found["foreign_mail"] == []
    assert found["state_files"] == []
    assert found["listing"] == ["benchd.sock", "mail"], found["listing"]
    assert found["wrote_own_box"] is False
    # Its own mail is readable at its usual path, and the daemon answers it as itself.
    assert any("the attacker's own mail" in text for text in found["own"]), found["own"]
    assert found["send"][0] == 0, found["send"]
    assert sandboxed.ok("mail", "list", "--handle", "operator")["total"] == 1
    # It may not leave the sandbox for its jobs.
    assert found["no_sandbox"][0] != 0 and "[forbidden]" in found["no_sandbox"][1]


def test_the_operator_may_spawn_outside_the_sandbox(sandboxed, tmp_path):
    found = _snoop(sandboxed, tmp_path, no_sandbox=True)
    # Unsandboxed, it sees the user's processes and BENCH_DIR as today's rules have it.
    assert found["victim_token"] in found["tokens"]
    assert "index.sqlite" in found["state_files"]


def test_the_wake_line_path_is_readable_inside(sandboxed):
    d = sandboxed
    d.ok("spawn", "--name", "reader", "--", "sh")
    d.ok("mail", "send", "reader", "-m", "read me from inside")
    # The wake pastes the path of the message, moved to mail/reader/read/.
    found = wait_for(
        lambda: re.search(r"You have mail from operator: (\S+)", d.bench("tail", "reader").out),
        30,
        "the wake line",
    )
    d.ok("type", "reader", f"cat {found.group(1)}; echo; echo read-rc=$?")
    wait_for(lambda: re.search(r"read-rc=\d", d.bench("tail", "reader").out), 30, "the cat")
    out = d.bench("tail", "reader").out
    assert "read me from inside" in out and "read-rc=0" in out, out


def test_a_session_in_a_sandbox_keeps_signals_and_exit_status(sandboxed):
    d = sandboxed
    s = d.ok("spawn", "--name", "trap", "--", "sh", "-c", "trap 'echo got-int' INT; echo armed; "
             "while :; do sleep 0.1; done")  # fmt: skip
    wait_for(lambda: _shows(d, "trap", "armed"), 30, "armed")
    d.ok("type", "trap", "\x03", "--no-enter")
    wait_for(lambda: _shows(d, "trap", "got-int"), 30, "the trapped ^C")
    d.ok("kill", "trap")
    ev = d.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev.get("signal") == 1, ev  # SIGHUP, as without the sandbox
    e = d.ok("spawn", "--name", "three", "--", "sh", "-c", "exit 3")
    ev = d.wait_event("session/exited", lambda ev: ev["session"] == e["session"])
    assert ev.get("exit") == 3, ev


@pytest.mark.parametrize("flags", [[], ["--no-sandbox"]], ids=["sandboxed", "not"])
def test_a_sessions_program_starts_with_no_signal_ignored(daemon, flags):
    """The daemon's Python ignores SIGPIPE and SIGXFSZ; a program started with them
    ignored would not die writing to a closed pipe (`yes | head -1` never ends)."""
    d = daemon
    d.ok("spawn", "--name", "sigs", *flags, "--", "sh", "-c",
         "grep SigIgn /proc/self/status; sleep 600")  # fmt: skip
    found = wait_for(
        lambda: re.search(r"SigIgn:\s*([0-9a-f]+)", d.bench("tail", "sigs").out), 30, "SigIgn"
    )
    assert int(found.group(1), 16) == 0, found.group(0)


@pytest.mark.parametrize("wrapper", ["perl", "python"])
@pytest.mark.parametrize("terminal", ["hung-up", "not-the-sessions"])
def test_a_sandbox_whose_terminal_went_during_its_setup_never_starts(bench_dir, wrapper, terminal):
    """The daemon killed while bwrap still sets a session up: bwrap's pid 1 asks for its
    parent-death signal only after that setup and ignores SIGHUP, so the program itself
    must see that its terminal went and not start. Either way it can find it: the pty
    hung up (the daemon's end closed), or no longer the session's controlling terminal
    (bwrap, the session's leader, died first). Each made certain here."""
    try:
        box = sandbox.choose("required", bench_dir, os.path.join(bench_dir, "benchd.sock"))[0]
    except WireError as err:
        pytest.skip(f"the sandbox cannot run here: {err}")
    assert box is not None
    if wrapper == "python":
        box.foreground = [sys.executable, "-I", "-S", "-c", sandbox.FOREGROUND]
    ran = os.path.join(bench_dir + "-files", "ran")
    os.makedirs(os.path.dirname(ran))
    master, slave = pty.openpty()
    if terminal == "hung-up":
        os.close(master)  # what the daemon's death does to the terminal
    argv = box.argv(["sh", "-c", f"touch {ran}; sleep 600"], "/", None)
    try:
        # A session of its own, the pty not its controlling terminal.
        r = subprocess.run(argv, stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                           start_new_session=True, timeout=60)  # fmt: skip
    finally:
        os.close(slave)
        if terminal != "hung-up":
            os.close(master)
    assert r.returncode == 129, r
    assert b"the session's terminal is gone" in r.stderr, r.stderr
    assert not os.path.exists(ran)


def test_isolation_off_is_said_everywhere(make_daemon):
    d = make_daemon("--isolation", "off")
    caps = _isolation(d)
    assert caps["isolation"] == "off" and "--isolation off" in caps["isolation_note"]
    assert "sandbox   OFF" in d.bench("status").out
    d.ok("spawn", "--name", "plain", "--", "sleep", "600")  # today's rules apply


def test_required_without_bwrap_refuses_to_start(bench_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env["BENCH_BWRAP"] = "/nonexistent/bwrap"
    r = subprocess.run(
        [sys.executable, "-m", "benchd.server.app", "--dir", bench_dir, "--isolation", "required"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r
    assert "cannot be sandboxed" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_auto_without_bwrap_starts_unsandboxed_and_says_so(make_daemon):
    d = make_daemon(start=False)
    d.daemon_env = {"BENCH_BWRAP": "/nonexistent/bwrap"}
    d.start()
    caps = _isolation(d)
    assert caps["isolation"] == "off" and "unavailable" in caps["isolation_note"]
    assert "sandbox   OFF" in d.bench("status").out


def test_a_stolen_token_is_refused_inside_a_sandbox(sandboxed, tmp_path):
    """Were a token to leak (mailed, say), a sandboxed session still cannot use it: its
    connections are placed by its namespace, and another session's token is not its own."""
    d = sandboxed
    victim = d.ok("spawn", "--name", "victim", "--", "sleep", "600")
    d.ok("mail", "send", "victim", "-m", "the victim's secret")
    out = tmp_path / "stolen.txt"
    d.ok(
        "spawn", "--name", "thief", "--env", f"STOLEN={_token_of(victim['pid'])}",
        "--env", f"OUT={out}", "--", "sh", "-c",
        'BENCH_TOKEN=$STOLEN bench mail list > "$OUT.tmp" 2>&1; echo "rc=$?" >> "$OUT.tmp"; '
        'mv "$OUT.tmp" "$OUT"',
    )  # fmt: skip
    text = wait_for(lambda: out.exists() and out.read_text(), 30, "the thief's try")
    assert "[bad-token]" in text and "rc=0" not in text, text
    assert "secret" not in text


def _without_user_namespaces(argv: list[str]) -> list[str]:
    """`argv` where no new user namespace may be made (bwrap --disable-userns), as in a
    container whose profile forbids them; skips where even that cannot be set up."""
    from benchd.runtime.sandbox import find_bwrap

    bwrap = find_bwrap()
    if bwrap is None:
        pytest.skip("no bwrap to make a place without user namespaces")
    outer = [bwrap, "--unshare-user", "--disable-userns", "--die-with-parent", "--bind", "/", "/",
             "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--"]  # fmt: skip
    if subprocess.run([*outer, "true"], capture_output=True).returncode != 0:
        pytest.skip("bwrap cannot make a user namespace here to forbid the nested ones in")
    return [*outer, *argv]


def test_required_without_user_namespaces_refuses_to_start(bench_dir):
    """The sandbox needs a user namespace (no capabilities for root): where none can be
    made, `required` refuses to start, naming why."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    argv = [sys.executable, "-m", "benchd.server.app", "--dir", bench_dir,
            "--isolation", "required"]  # fmt: skip
    r = subprocess.run(_without_user_namespaces(argv), capture_output=True, text=True,
                       env=env, timeout=60)  # fmt: skip
    assert r.returncode == 2, r
    assert "cannot be sandboxed" in r.stderr and "namespace" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_auto_without_user_namespaces_says_why_it_runs_unsandboxed(bench_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    argv = [sys.executable, "-m", "benchd.server.app", "--dir", bench_dir,
            "--isolation", "auto"]  # fmt: skip
    proc = subprocess.Popen(_without_user_namespaces(argv), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("benchd ready")
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    # The start's one line says that and why (the CLI outside cannot ask: the daemon
    # cannot read its namespace from in there, so it is never the operator).
    lines = [line for line in err.splitlines() if "not sandboxed" in line]
    assert len(lines) == 1, err
    assert "unavailable" in lines[0] and "namespace" in lines[0], lines
