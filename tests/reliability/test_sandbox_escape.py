"""The sandbox closed: each finding of the trial that broke it, redone from inside a real
session, as root and as an unprivileged user the test makes.

The attacks are the hostile agent's (tools/proofs/hostile_agent.py, stdlib Python run as
the session's program): no capability, no unmount of what hides BENCH_DIR or /proc, no
cgroup release_agent, no process outside the session's PID namespace, no other session's
terminal (TIOCSTI, its input, its screen, its wakes, its ready prompt, its stall, its
termios), and no operator on another daemon's socket.

Each test needs the sandbox; it skips, saying why, where the daemon cannot make one. The
`user` variant runs the daemons as a user made for this module (tests/support/otheruser.py)
when the tests run as root, and as the tests' own user otherwise; `root` needs root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import termios
import uuid

import pytest

from tests.support import otheruser
from tests.support.daemon import FAST, Benchd, short_tmpdir
from tests.support.wait import wait_for
from tools.proofs.hostile_sandbox import marked_processes

AGENT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "tools",
    "proofs",
    "hostile_agent.py",
)
NO_CAPS = "0000000000000000"


@pytest.fixture(scope="module")
def unprivileged():
    """The user the `user` variant's daemons run as (None: the tests' own, not root)."""
    if os.geteuid() != 0:
        yield None
        return
    why = otheruser.why_not()
    if why:
        pytest.skip(why)
    name = otheruser.make_user()
    try:
        yield name
    finally:
        otheruser.remove_user(name)


@pytest.fixture(params=["root", "user"])
def boxes(request):
    """Make sandboxed daemons (one per call, each in its own BENCH_DIR) as root or as an
    unprivileged user."""
    if request.param == "root":
        if os.geteuid() != 0:
            pytest.skip("the root variant needs the tests to run as root")
        user = None
    else:
        user = request.getfixturevalue("unprivileged")
    made: list[Benchd] = []

    def make(*opts: str) -> Benchd:
        d = short_tmpdir("e")
        b = otheruser.UserBenchd(d, [*FAST, *opts], user) if user else Benchd(d, [*FAST, *opts])
        made.append(b)
        b.start()
        caps = b.ok("status")["caps"]
        if caps["isolation"] != "on":
            pytest.skip(f"the sandbox cannot run here: {caps['isolation_note']}")
        return b

    yield make
    for b in made:
        b.stop()
        shutil.rmtree(b.dir, ignore_errors=True)
        shutil.rmtree(b.scratch, ignore_errors=True)


def attack(d: Benchd, name: str, role: str, *args: str, flags: tuple[str, ...] = ()) -> dict:
    """Spawn `name` running the hostile agent's ROLE; its findings once written."""
    return d.ok(
        "spawn", "--name", name, *flags, "--", sys.executable, AGENT, role, d.scratch, *args
    )


def findings(d: Benchd, filename: str, timeout: float = 60) -> dict:
    path = os.path.join(d.scratch, filename)
    return json.loads(wait_for(lambda: _read(path), timeout, f"the attacker's {filename}"))


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def terminal_of(pid: int) -> str:
    """The pty a session's leader runs on, as the host names it (/dev/pts/N)."""
    return os.readlink(f"/proc/{pid}/fd/0")


def shown(d: Benchd, handle: str, text: str) -> bool:
    return text in d.bench("tail", handle, "--screen").out


def barrier(d: Benchd, handle: str) -> None:
    """The victim's shell has run everything typed before: the operator types a command
    and waits for its output (so what an attack typed would have run by now)."""
    tag = uuid.uuid4().hex[:8]
    d.ok("type", handle, f"echo done-{tag}-$((6*7))")
    wait_for(lambda: shown(d, handle, f"done-{tag}-42"), 30, "the victim's shell")


def victim_shell(d: Benchd, *flags: str) -> tuple[dict, str]:
    v = d.ok("spawn", "--name", "victim", *flags, "--", "sh")
    barrier(d, "victim")
    return v, terminal_of(v["pid"])


# ------------------------------------------------------------ 1-4: what root could do


def test_a_session_has_no_capability_and_cannot_unmount_what_hides_bench_dir(boxes):
    """Finding 1: umount2(BENCH_DIR) brought back the state directory; umount2(/proc)
    the host's processes and their tokens."""
    d = boxes()
    d.ok("spawn", "--name", "victim", "--", "sleep", "600")
    attack(d, "attacker", "caps")
    assert findings(d, "caps-attacker.json")["cap_eff"] == NO_CAPS
    attack(d, "unmounter", "unmount")
    got = findings(d, "unmount-unmounter.json")
    assert got["bench_dir"] != "ok" and got["proc"] != "ok", got
    assert got["listing"] == ["benchd.sock", "mail"], got
    assert got["planted"] is False and got["tokens"] == 0, got
    assert got["pids"] <= 10, got  # its own processes only
    assert not os.path.exists(os.path.join(d.dir, "mail", "victim", "inbox", "planted.md"))


def test_a_session_cannot_set_a_cgroup_release_agent(boxes):
    """Finding 2: a release_agent runs as a kernel helper outside every namespace (it
    connected as the operator). Mounting a cgroup hierarchy fails, and the hierarchies
    already mounted are read-only in the sandbox."""
    d = boxes()
    attack(d, "attacker", "cgroup")
    got = findings(d, "cgroup-attacker.json")
    assert got["mount"] != "ok", got
    assert "written" not in got["existing"].values(), got
    assert not got.get("released"), got
    assert not os.path.exists(os.path.join(d.scratch, "released-attacker.txt"))


def test_tiocsti_cannot_type_into_another_sessions_terminal(boxes):
    """Finding 3: TIOCSTI on the victim's terminal typed `bench mail send` there."""
    d = boxes()
    _v, path = victim_shell(d)
    attack(d, "attacker", "tty", "tiocsti", path, "0",
           "bench mail send operator -m typed-by-the-attacker\n")  # fmt: skip
    got = findings(d, "tty-tiocsti-attacker.json")
    barrier(d, "victim")
    assert got["open"] == "ENOENT", got  # no such path inside its sandbox
    assert got["done"] == 0
    assert d.ok("mail", "list", "--handle", "operator")["total"] == 0
    assert not shown(d, "victim", "typed-by-the-attacker")


def test_no_process_outlives_its_session_outside_its_namespace(boxes):
    """Finding 4: a sleeper left the session's PID namespace (a release_agent started it;
    setns into the host's namespace is tried too) and outlived the session's --deadline."""
    d = boxes()
    marker = f"bench-left-{uuid.uuid4().hex[:8]}"
    a = attack(d, "leaver", "leave", marker, flags=("--deadline", "3s"))

    def survivors() -> list[int]:
        return marked_processes(marker)

    try:
        got = findings(d, "leave-leaver.json")
        d.wait_event("session/exited", lambda e: e["session"] == a["session"], 60)
        wait_for(lambda: not survivors(), 20, "the session's processes to end with it")
        assert got["setns"] != "ok" and got["release_agent"] != "ok", got
    finally:
        for pid in survivors():  # ours: their argv carries this test's marker
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------ 5-10: another's terminal


def test_another_sessions_input_cannot_be_read(boxes):
    """Finding 5: blocking reads on the victim's /dev/pts/N took lines the operator typed."""
    d = boxes()
    _v, path = victim_shell(d)
    attack(d, "attacker", "tty", "read", path, "30")
    opened = os.path.join(d.scratch, "tty-read-attacker.opened")
    done = os.path.join(d.scratch, "tty-read-attacker.json")
    wait_for(lambda: os.path.exists(opened) or os.path.exists(done), 60, "the attacker")
    for i in range(10):
        d.ok("type", "victim", f"echo line-$(({i}*1000+7))")
    for i in range(10):  # every line reached the victim's shell
        wait_for(lambda i=i: shown(d, "victim", f"line-{i * 1000 + 7}"), 30, f"line {i}")
    got = findings(d, "tty-read-attacker.json")
    assert got["open"] == "ENOENT" and got["stolen"] == "", got


def test_another_sessions_screen_cannot_be_written(boxes):
    """Finding 6: what was written came out as the victim's own output."""
    d = boxes()
    _v, path = victim_shell(d)
    attack(d, "attacker", "tty", "write", path, "0", "All 112 tests passed. Task complete\n")
    got = findings(d, "tty-write-attacker.json")
    barrier(d, "victim")
    assert got["open"] == "ENOENT", got
    assert not shown(d, "victim", "All 112 tests passed")


def test_another_sessions_wakes_cannot_be_held_off(boxes):
    """Finding 7: a byte every 0.5 s kept the victim busy; its mail was never woken."""
    d = boxes()
    _v, path = victim_shell(d)
    attack(d, "attacker", "tty", "hold", path, "60")
    opened = os.path.join(d.scratch, "tty-hold-attacker.opened")
    done = os.path.join(d.scratch, "tty-hold-attacker.json")
    wait_for(lambda: os.path.exists(opened) or os.path.exists(done), 60, "the attacker")
    sent = d.ok("mail", "send", "victim", "-m", "wake me")
    # The hold lasts 60 s: a wake within 30 s is one the attacker could not stop.
    d.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"], 30)
    assert findings(d, "tty-hold-attacker.json")["open"] == "ENOENT"


def test_another_sessions_ready_prompt_cannot_be_faked(boxes):
    """Finding 8: a prompt written into a busy agent's screen made the daemon type the
    wake into it mid-turn. The victim shows its prompt only once told to (a file)."""
    d = boxes()
    go = os.path.join(d.scratch, "victim-ready")
    v = d.ok("spawn", "--name", "victim", "--ready", "READY>", "--", "sh", "-c",
             f"echo working; while [ ! -e {go} ]; do sleep 0.05; done; printf 'READY> '; "
             "exec cat")  # fmt: skip
    wait_for(lambda: shown(d, "victim", "working"), 30, "the victim to start")
    sent = d.ok("mail", "send", "victim", "-m", "wake me when ready")
    attack(d, "attacker", "tty", "prompt", terminal_of(v["pid"]), "0", "READY> ")
    got = findings(d, "tty-prompt-attacker.json")
    assert got["open"] == "ENOENT", got
    before = d.last_seq()
    open(go, "w").close()
    woken = d.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"], 30)
    assert woken["seq"] > before, "the wake was typed before the victim's own prompt"


def test_another_sessions_stall_cannot_be_hidden(boxes):
    """Finding 9: bytes written to a stuck job's terminal kept its stall report away."""
    d = boxes()
    j = d.ok("spawn", "--name", "stuck", "--stall-after", "2s", "--mail", "-",
             "--", "sh", "-c", "echo stuck; exec sleep 600", input="get stuck")  # fmt: skip
    wait_for(lambda: shown(d, "stuck", "stuck"), 30, "the job to start")
    attack(d, "attacker", "tty", "hold", terminal_of(j["pid"]), "60")
    # The hold lasts 60 s; a stall within 30 s is one it could not hide.
    d.wait_event("job/stalled", lambda e: e["session"] == j["session"], 30)
    assert findings(d, "tty-hold-attacker.json")["open"] == "ENOENT"


def test_another_sessions_terminal_modes_cannot_be_changed(boxes):
    """Finding 10: tcsetattr on the victim's terminal (no echo, no line editing)."""
    d = boxes()
    _v, path = victim_shell(d)
    attack(d, "attacker", "tty", "tcsetattr", path)
    got = findings(d, "tty-tcsetattr-attacker.json")
    assert got["open"] == "ENOENT", got
    fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        lflag = termios.tcgetattr(fd)[3]
    finally:
        os.close(fd)
    assert lflag & termios.ECHO and lflag & termios.ICANON, hex(lflag)
    barrier(d, "victim")


def test_the_sessions_own_terminal_works_inside(boxes):
    """What the private /dev keeps: the session's own terminal (tty, ttyname, /dev/tty)
    and new ptys of its own (python's pty, as script and tmux open them)."""
    d = boxes()
    d.ok("spawn", "--name", "own", "--", "sh")
    # Each line typed once the shell reads (typed while it starts, a line is echoed by the
    # terminal and its output interleaved with what comes next).
    barrier(d, "own")
    d.ok("type", "own", "tty; test -t 0 && echo is-a-tty; echo hi > /dev/tty; ls /dev/pts")
    wait_for(lambda: shown(d, "own", "is-a-tty"), 30, "the shell's answer")
    d.ok("type", "own", f"{sys.executable} -c \"import os, pty; print('ttyname', "
         "os.ttyname(0)); pid, fd = pty.fork(); pid or os.execlp('echo', 'echo', "
         "'from-a-new-pty'); print(os.read(fd, 100))\"")  # fmt: skip
    wait_for(lambda: shown(d, "own", "from-a-new-pty"), 30, "a pty of its own")
    if shutil.which("script"):  # util-linux's, as agents' shell tools use it
        d.ok("type", "own", "script -qc 'echo script-on-$(tty)' /dev/null")
        wait_for(lambda: shown(d, "own", "script-on-/dev/pts/0"), 30, "script's own pty")
    screen = d.bench("tail", "own", "--screen").out
    assert "/dev/console" in screen and "is-a-tty" in screen and "ttyname /dev/console" in screen
    assert re.search(r"^ptmx\s*$", screen, re.M), screen  # its own devpts: no one else's


# ------------------------------------------------------------ another daemon


def test_a_session_is_nobody_on_another_daemons_socket(boxes):
    """A session of one daemon speaking to another daemon of the same user (whose
    BENCH_DIR it can see) is `unplaceable` there, never the operator: both ways."""
    first, second = boxes(), boxes()
    for visitor, here, there in (("visitor-a", first, second), ("visitor-b", second, first)):
        sock = os.path.join(there.dir, "benchd.sock")
        there.ok("mail", "send", "victim", "-m", "the other daemon's secret")
        attack(here, visitor, "other-daemon", sock)
        got = findings(here, f"other-daemon-{visitor}.json")
        assert got["hello"] in ("unplaceable", "closed"), got
        assert got.get("list") in (None, "unplaceable", "closed"), got
        assert got.get("no_sandbox") in (None, "unplaceable", "closed"), got
    # And the operator of each (a process of the user's, not in a sandbox) still is.
    assert first.ok("mail", "list", "--handle", "victim")["total"] == 1
