"""A daemon that stops ends every session it started, even one whose spawn was mid-way
when the stop began (issue 40, defect 5: a sandboxed session's bwrap outlived its
test's daemon under load). Spawns (jobs: their task mail is committed between the
handle's reservation and the process's start) run from several clients at once while
the daemon is told to stop; once it has exited, no process started for any of them
may still run.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

from tests.conftest import BENCH, ROOT, wait_for


def _marked(mark: bytes) -> list[int]:
    """The live processes (not zombies) whose environment holds `mark`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def test_spawns_racing_a_stop_leave_no_process(make_daemon, tmp_path):
    d = make_daemon()
    mark = "STOPRACE=" + uuid.uuid4().hex
    task = tmp_path / "task.md"
    task.write_text("wait\n")
    stop = threading.Event()
    started = threading.Semaphore(0)

    def spawner(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            r = subprocess.run(
                [
                    BENCH,
                    "spawn",
                    "--json",
                    "--name",
                    f"w{n}-{i}",
                    "--env",
                    mark,
                    "--mail",
                    str(task),
                    "--",
                    "sleep",
                    "600",
                ],
                env=d.env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            if r.returncode == 0:
                started.release()
            else:
                return  # the daemon is stopping (shutting-down) or gone

    threads = [threading.Thread(target=spawner, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        assert started.acquire(timeout=60), "no spawn succeeded"
        d.stop()  # SIGTERM while spawns are in flight; returns once benchd exited
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    # The daemon has exited: a process of its sessions still here outlived it. The
    # kernel delivers a parent-death signal at once, so a short wait is only for that.
    deadline = time.monotonic() + 10
    left = _marked(mark.encode())
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _marked(mark.encode())
    try:
        assert left == [], [_cmdline(p) for p in left]
    finally:
        for p in left:
            os.kill(p, signal.SIGKILL)


HELPER = """
import os, sys
from benchd.runtime.terminal import Terminal
argv = ["bash", "-c", 'trap "" HUP; exec sleep 600']
env = dict(os.environ, STOPRACE=sys.argv[1])
t = Terminal(argv, "/", env, 24, 80, 1024, die_with=os.getpid())
print(t.pid, flush=True)
sys.stdin.read()  # until the test kills this process
"""


def test_a_sessions_leader_dies_with_the_daemon_even_if_it_ignores_sighup(tmp_path):
    # The closed pty's SIGHUP is what ends a leader when the daemon dies; a leader that
    # ignores it (or a bwrap not yet past its own --die-with-parent) would outlive the
    # daemon. The parent-death signal is set in the child before it execs.
    token = uuid.uuid4().hex
    helper = subprocess.Popen(
        [sys.executable, "-c", HELPER, token],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        pid = int(helper.stdout.readline())
        mark = f"STOPRACE={token}".encode()
        wait_for(lambda: _marked(mark) == [pid], 20, "the leader running")
        helper.kill()
        helper.wait()
        wait_for(lambda: _marked(mark) == [], 20, "the leader gone with its parent")
    finally:
        helper.kill()
        helper.wait()
        helper.stdin.close()
        helper.stdout.close()
        for p in _marked(f"STOPRACE={token}".encode()):
            os.kill(p, signal.SIGKILL)


def test_a_stopping_daemon_kills_a_sandbox_init_its_bwrap_left_behind(make_daemon, tmp_path):
    # The race above, made certain: bwrap's inner child asks for its parent-death signal
    # only after it is cloned, so a bwrap leader that died first leaves it running,
    # re-parented to the daemon (its subreaper). A stopping daemon kills each such
    # stray bwrap; an orphan of any other name (a program that left its session on
    # purpose) is not the daemon's to kill.
    d = make_daemon()
    token = uuid.uuid4().hex
    fake = tmp_path / "bwrap"  # a process whose command name is bwrap
    shutil.copy("/bin/sleep", fake)
    # Each in a session of its own, out of the process group `bench kill` signals.
    script = f'STRAY={token} setsid "{fake}" 600 & STRAY={token} setsid sleep 600 & read x'
    d.ok("spawn", "--name", "leaver", "--no-sandbox", "--", "bash", "-c", script)
    d.wait_until(lambda: len(_marked(f"STRAY={token}".encode())) == 2, 20, "both started")
    d.ok("kill", "leaver")  # its children are orphans of the daemon now
    strays = _marked(f"STRAY={token}".encode())
    try:
        assert len(strays) == 2, [_cmdline(p) for p in strays]
        d.stop()
        wait_for(
            lambda: (
                [_cmdline(p).split()[0] for p in _marked(f"STRAY={token}".encode())] == ["sleep"]
            ),
            20,
            "the stray bwrap killed, the other orphan left running",
        )
    finally:
        for p in _marked(f"STRAY={token}".encode()):
            os.kill(p, signal.SIGKILL)
