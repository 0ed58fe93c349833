"""A fork server for the suite's daemons: one process per test worker that has imported
benchd once and forks a daemon for each `Benchd.start`.

Why: a daemon's start was mostly Python importing benchd (trio, pyte, the daemon's own
modules): about 0.3 s of CPU, paid by each of the suite's ~700 daemon starts. A child
forked from a process that already holds those modules skips straight to
`benchd.server.app.main(argv)`: the same code from the parser on, a real process with
its own pid, environment, working directory and stdio, reaped by the zygote, which
reports its exit status to the test over the request's connection.

What differs from an exec'd daemon, and why it does not matter to the tests that use it:
its parent is the zygote, not the test (nothing in the daemon looks at its parent); its
/proc/PID/cmdline and /proc/PID/environ are the zygote's (the kernel keeps the exec'd
ones; `os.environ` is the request's, which is what the daemon and its sessions read), so
tests/support/leaks.py is told each forked daemon's test and command line. A `Benchd`
run through a wrapper (another user) or with BENCH_TEST_ZYGOTE=0 is exec'd as before.

The server's side runs as `python -m tests.support.zygote`; it must stay single-threaded
(it forks) and ends when its test worker does (parent-death signal, which is per thread:
the zygote is started by the worker's first `Benchd.start`, on its main thread) or
closes it. Its daemons share its umask, rlimits and hash seed, as exec'd daemons of one
worker would.
"""

import atexit
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.support import leaks

# Off unless the test run turns it on (tests/conftest.py; BENCH_TEST_ZYGOTE=0 keeps it
# off there too): the tools that run daemons through Benchd (benchmarks, proofs) measure
# and show exec'd ones.
ENABLED = False
MODULE = "benchd.server.app"


# --- the test's side -------------------------------------------------------------------


class ForkedProcess:
    """The part of subprocess.Popen that Benchd and the tests use, for a forked daemon.
    The zygote reaps it and writes its exit code (Popen's convention: -N for signal N)
    on `conn`, which this reads."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, stdout, stderr):
        self.args = args
        self.pid = pid
        self.stdin = None
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._conn: socket.socket | None = conn

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self._conn is not None:
            if not select.select([self._conn], [], [], timeout)[0]:
                return None
            line = self._conn.recv(64)
            self._conn.close()
            self._conn = None
            if line.strip():
                self.returncode = int(line)
                return self.returncode
        # Nothing said: the zygote ended first (its worker is ending, or it failed). The
        # daemon may still run, re-parented: watch its pid; its exit code is lost.
        return self._watch(timeout)

    def _watch(self, timeout: float | None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if not leaks.alive(self.pid):
                self.returncode = -signal.SIGKILL
                return self.returncode
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        rc = self._collect(timeout)
        if rc is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return rc

    def send_signal(self, sig: int) -> None:
        # As Popen: no signal once the exit was seen (the pid may be someone else's).
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bz", dir="/tmp")
        self.path = os.path.join(self.dir, "z.sock")
        env = dict(os.environ)
        env.pop("PYTEST_BENCH_TEST", None)  # each daemon's test is told to leaks.py instead
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.zygote", self.path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"zygote ready":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the daemon zygote did not start: {line!r}")

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str | None) -> ForkedProcess:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            req = json.dumps({"argv": argv, "env": env, "cwd": cwd or os.getcwd()}).encode()
            socket.send_fds(conn, [req + b"\n"], [0, out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        line = conn.recv(64)
        if not line.strip().isdigit():
            conn.close()
            os.close(out_r)
            os.close(err_r)
            raise RuntimeError(f"the daemon zygote did not fork: {line!r}")
        stdout = open(out_r, encoding="utf-8")  # noqa: SIM115 - the caller closes it, as Popen's
        stderr = open(err_r, encoding="utf-8")  # noqa: SIM115 - likewise
        return ForkedProcess([sys.executable, "-m", MODULE, *argv], int(line), conn, stdout, stderr)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.rmdir(self.dir)


_zygote: _Zygote | None = None


def spawn(argv: list[str], env: dict[str, str], cwd: str | None) -> ForkedProcess:
    """A daemon `python -m benchd.server.app *argv` forked by this worker's zygote
    (started on the first call)."""
    global _zygote
    if _zygote is None or _zygote.proc.poll() is not None:
        _zygote = _Zygote()
        atexit.register(close)
    return _zygote.spawn(argv, env, cwd)


def close() -> None:
    """End the zygote (before the run's leak check: it is the run's process too)."""
    global _zygote
    if _zygote is not None:
        _zygote.close()
        _zygote = None


# --- the zygote's side -----------------------------------------------------------------


def _child(req: dict, fds: list[int]) -> None:
    """In the forked child: become `python -m benchd.server.app *argv`. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)  # the zygote's socket, its connections, the request's fds
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [MODULE, *req["argv"]]
        import random

        random.seed()  # not the zygote's state, shared by every child
        from benchd.server import app

        code = app.main(req["argv"])
    except SystemExit as e:  # as the interpreter ends on one
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - shown as an exec'd daemon's traceback would be
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
        os._exit(code)


def _fork_one(listener: socket.socket, waiting: dict[int, socket.socket]) -> None:
    """Take one request and fork its daemon. A request that fails (its test went away,
    a fork refused on a loaded machine) fails alone: the test sees its connection close
    without a pid; the zygote goes on serving the others."""
    try:
        conn, _ = listener.accept()
    except OSError:
        return  # the test gave up meanwhile
    fds: list[int] = []
    try:
        # SOCK_SEQPACKET: the request is one message, read whole with its fds.
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        req = json.loads(msg)
        if len(fds) != 3:
            raise ValueError("a request carries stdin, stdout and stderr")
        pid = os.fork()
        if pid == 0:
            _child(req, fds)
        waiting[pid] = conn
        conn.sendall(f"{pid}\n".encode())
    except (OSError, ValueError):
        conn.close()  # a forked daemon stays in `waiting`: it is still reaped
    finally:
        for fd in fds:
            os.close(fd)


def _serve(path: str) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    from benchd.server import app  # noqa: F401 - the point: imported once, before any fork

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}  # pid -> the connection told its exit code
    sys.stdout.write("zygote ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                _fork_one(listener, waiting)
            else:
                while True:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        break
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass  # the test is gone; nothing waits for this exit
                conn.close()


if __name__ == "__main__":
    _serve(sys.argv[1])
