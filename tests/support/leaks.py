"""What a test run leaves behind: processes it started that still run, and the
BENCH_DIRs it made that still exist. tests/conftest.py checks both when the run ends
(in each xdist worker, for what that worker started) and fails the run naming them.

A process is known as the run's by a token in its environment: every process the run
starts (benchd, `bench up`'s daemon, nats-server, `bench bridge`, a session's stand-in)
inherits PYTEST_BENCH_RUN, whose value this process sets at import. The name does not
start with BENCH_, so the tests' own environments (which drop BENCH_*) keep it. The
daemon's double fork and setsid do not drop an environment, so a daemon that outlived
its test with parent 1 is still found. Directories are known because short_tmpdir
registers each one it makes.

Which test started a leftover: while a test runs (its fixtures' setup and teardown
included), PYTEST_BENCH_TEST holds its node id (tests/conftest.py), so every process it
starts, and every process those start (a daemon's sessions, their bwrap), carries it;
a leftover is named with it, and with its whole command line (the program a bwrap or a
`bash -c` runs is at the end of a long one).
"""

import os
import shutil
import signal
import tempfile
import time
import uuid

RUN_VAR = "PYTEST_BENCH_RUN"
TEST_VAR = "PYTEST_BENCH_TEST"  # the node id of the test running (set by conftest)
TOKEN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
_MARK = f"{RUN_VAR}={TOKEN}".encode()
_TEST = f"{TEST_VAR}=".encode()
CMD_SHOWN = 4000  # characters of a leftover's command line shown (its middle elided)
_made: list[str] = []
# pid -> (command line, test) of the daemons forked by tests/support/zygote.py: their
# /proc environ and cmdline are the zygote's, which name neither.
_forked: dict[int, tuple[str, str]] = {}


def forked(pid: int, cmd: str) -> None:
    """A daemon forked for the test now running (tests/support/zygote.py)."""
    _forked[pid] = (cmd, os.environ.get(TEST_VAR, "no test (started outside one)"))


def running(nodeid: str | None) -> None:
    """The test now running (None: none): processes started from here on carry it."""
    if nodeid is None:
        os.environ.pop(TEST_VAR, None)
    else:
        os.environ[TEST_VAR] = nodeid


def shown(cmd: str, limit: int = CMD_SHOWN) -> str:
    """A command line whole, or if very long its start and its end (where a wrapper's
    program is) around an elision that says how much was left out."""
    if len(cmd) <= limit:
        return cmd
    head = limit // 4
    tail = limit - head
    return f"{cmd[:head]} [... {len(cmd) - head - tail} characters ...] {cmd[-tail:]}"


def mark_run() -> None:
    """Give every process started from here on this process's token."""
    os.environ[RUN_VAR] = TOKEN


def tmpdir(prefix: str) -> str:
    """A short directory in /tmp (AF_UNIX paths are small), checked at the end of the run."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    _made.append(d)
    return d


def _ours() -> dict[int, tuple[str, str]]:
    """pid -> (command line, the test that started it) of the live processes that
    carry this process's token."""
    found = {}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if _MARK not in environ:
                continue
            test = next(
                (e[len(_TEST) :].decode(errors="replace") for e in environ if e.startswith(_TEST)),
                "no test (started outside one)",
            )
            if not alive(int(name)):
                continue  # a zombie: already ended, its parent has not reaped it yet
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        found[int(name)] = _forked.get(int(name), (cmd, test))
    return found


def alive(pid: int) -> bool:
    """Whether pid runs: a zombie has ended (whoever adopted it may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def line(pid: int, cmd: str, test: str) -> str:
    return f"process {pid} still running, started by {test}: {shown(cmd)}"


def leftovers(grace: float = 10.0) -> list[str]:
    """Lines naming each process still running and each directory still there; a process
    that is just ending gets `grace` seconds. Then ends those processes (SIGKILL, by pid)
    and removes those directories, so one run's leak does not load the next."""
    deadline = time.monotonic() + grace
    procs = _ours()
    while procs and time.monotonic() < deadline:
        time.sleep(0.2)
        procs = _ours()
    dirs = [d for d in _made if os.path.lexists(d)]
    lines = [line(pid, cmd, test) for pid, (cmd, test) in sorted(procs.items())]
    lines += [f"directory still there: {d}" for d in dirs]
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    return lines
