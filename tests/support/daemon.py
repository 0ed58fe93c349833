"""One way to run a real benchd for a test or a tool: `Benchd`, a process in a short
temporary BENCH_DIR (with test hooks), and the real `bench` CLI against it.

Start-up waits for benchd's readiness line (and fails at once if benchd exits); nothing
sleeps to synchronise.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from bench_wire.client import Client
from bench_wire.config import BY_FLAG
from tests.support import inproc, leaks, zygote
from tests.support.wait import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
BENCH = os.path.join(BIN, "bench")
# Fast reactor timings so the suite runs quickly; tests that are about timing set their own.
FAST = ["--idle-gate", "0.3", "--paste-settle", "0.05", "--enter-check", "1.0"]
# The sender limits raised out of the way (to the highest value each accepts), for the
# runs that measure the mailroom under load (many clients sending as fast as they can),
# not its limits.
UNLIMITED = [
    arg
    for flag in (
        "--send-burst",
        "--send-rate",
        "--operator-send-burst",
        "--operator-send-rate",
        "--mailbox-messages",
        "--mailbox-bytes",
    )
    for arg in (flag, str(BY_FLAG[flag].type(BY_FLAG[flag].high)))
]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return f"Result(rc={self.rc}, out={self.out!r}, err={self.err!r})"


def short_tmpdir(prefix: str = "b") -> str:
    # pytest's tmp_path can exceed AF_UNIX's 108 bytes; BENCH_DIR must stay short. The
    # run checks at its end that each one was removed (tests/support/leaks.py).
    return leaks.tmpdir(prefix)


class Benchd:
    """A real benchd (with --test-hooks) in bench_dir; `cwd` is its working directory
    (None: ours), for the tests that need it somewhere empty."""

    def __init__(self, bench_dir: str, opts: list[str], cwd: str | None = None):
        self.dir = bench_dir
        self.opts = opts
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.daemon_env: dict[str, str] = {}  # extra environment for benchd itself
        # How a command of the daemon's user is started (tests/support/otheruser.py
        # runs them as another user).
        self.wrap: Callable[[list[str]], list[str]] = list
        # False: every `bench` command a real process (tests/support/inproc.py says which
        # run in the test process otherwise).
        self.cli_in_process = True

    @property
    def scratch(self) -> str:
        """A directory beside BENCH_DIR for files a session's program writes: a sandboxed
        session sees nothing of BENCH_DIR but the socket and its own mailbox."""
        path = self.dir.rstrip("/") + "-files"
        os.makedirs(path, exist_ok=True)
        return path

    def env(self, **extra) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
        env["BENCH_DIR"] = self.dir
        env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
        env.update(extra)
        return env

    def start(self, timeout: float = 20.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "benchd.server.app",
            "--dir",
            self.dir,
            "--test-hooks",
            *self.opts,
        ]
        if self.wrap is list and zygote.ENABLED:
            self.proc = zygote.spawn(cmd[3:], self.env(**self.daemon_env), self.cwd)
            leaks.forked(self.proc.pid, " ".join(cmd))
        else:
            self.proc = subprocess.Popen(
                self.wrap(cmd),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env(**self.daemon_env),
                text=True,
                cwd=self.cwd,
            )
        line = self.proc.stdout.readline()  # blocks until ready, or EOF if benchd died
        if not line.startswith("benchd ready"):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.proc.kill()
            raise RuntimeError(f"benchd did not start: {line!r} {err}")

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc = None
        return rc

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def bench(
        self, *args: str, input: str | None = None, env: dict | None = None, timeout: float = 60.0
    ) -> Result:
        e = self.env()
        if env:
            e.update(env)
        if input is None and self.wrap is list and self.cli_in_process and inproc.fits(args):
            rc, out, err = inproc.run(list(args), e)
            return Result(subprocess.CompletedProcess([BENCH, *args], rc, out, err))
        proc = subprocess.run(
            self.wrap([BENCH, *args]),
            input=input,
            capture_output=True,
            text=True,
            env=e,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        return Result(proc)

    def ok(self, *args: str, **kw) -> dict:
        """Run `bench ... --json`, assert success, return the parsed answer."""
        args = list(args)
        # --json belongs before `--` (after it, it would be part of the spawned command).
        at = args.index("--") if "--" in args else len(args)
        r = self.bench(*args[:at], "--json", *args[at:], **kw)
        assert r.rc == 0, r
        return r.json

    def connect(self) -> Client:
        return Client(self.dir)

    def call(self, req: dict) -> dict:
        with self.connect() as c:
            c.send(req)
            return c.recv()

    def events(self, since: int = 0, kind: str | None = None) -> list[dict]:
        out = []
        with self.connect() as c:
            req = {"verb": "events", "since": since}
            if kind:
                req["kind"] = kind
            c.send(req)
            while True:
                a = c.recv()
                assert a.get("ok", False), a
                if a["type"] == "end":
                    return out
                out.append(a["event"])

    def wait_event(
        self, kind: str, pred=lambda e: True, timeout: float = 30.0, since: int = 0
    ) -> dict:
        """The first event of `kind` matching pred, polling the log until the deadline.
        Each poll reads only what came after the events already looked at (a daemon
        shared by a module's tests holds all of theirs)."""
        after = since

        def found():
            nonlocal after
            evs = self.events(after, kind)
            hit = next((e for e in evs if pred(e)), None)
            if hit is None and evs:
                after = evs[-1]["seq"]
            return hit

        return wait_for(found, timeout, f"a {kind} event matching")

    def last_seq(self) -> int:
        evs = self.events()
        return evs[-1]["seq"] if evs else 0

    def wait_until(self, fn, timeout: float = 30.0, what: str = "condition"):
        return wait_for(fn, timeout, what)
