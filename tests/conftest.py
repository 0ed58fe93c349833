"""Shared fixtures: a real benchd process in a short temporary BENCH_DIR, and the real CLI.

`daemon` is a fresh benchd for one test. `shared` is one benchd for all the tests of a
module that need no fresh directory: each reads only what it sent, to handles of its
own (`who`), and may not restart it, change its options or count what the whole
daemon holds. A start costs more than most tests (a second on a loaded machine).

The helpers behind them live in tests/support (one daemon class, one wait, one spawn,
one refusal assertion); they are re-exported here for the tests that import them from
`tests.conftest`.

At the end of the run (of each xdist worker) no process the run started may still run
and no BENCH_DIR it made may still exist (tests/support/leaks.py): the run fails and
names them, each process with the test that started it.
"""

import itertools
import os
import shutil
import sys

import pytest

from tests.support import leaks, zygote
from tests.support.daemon import BENCH, BIN, FAST, ROOT, Benchd, Result, short_tmpdir
from tests.support.refusal import assert_refused
from tests.support.spawn import STANDIN, spawn, spawn_standin, standin_argv
from tests.support.wait import wait_for

__all__ = [
    "BENCH",
    "BIN",
    "FAST",
    "ROOT",
    "STANDIN",
    "Benchd",
    "Result",
    "assert_refused",
    "short_tmpdir",
    "spawn",
    "spawn_standin",
    "standin_argv",
    "wait_for",
]


leaks.mark_run()
zygote.ENABLED = os.environ.get("BENCH_TEST_ZYGOTE", "1") != "0"


def _bytecode_cache() -> None:
    """Every Python process the run starts (each benchd, each `bench`, the stand-ins)
    reads the project's compiled modules from one cache in the venv instead of compiling
    them again. Where PYTHONDONTWRITEBYTECODE is set nothing is ever cached, and each
    benchd start costs about 0.57 s of CPU instead of 0.40 (the suite starts hundreds);
    the prefix keeps the source tree as clean as that variable kept it."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(sys.prefix, "pycache"))


_bytecode_cache()
_LEFTOVERS = pytest.StashKey[list[str]]()


def pytest_configure(config):
    config.stash[_LEFTOVERS] = []
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WorkerLeftovers(config), "bench-leftovers")


class _WorkerLeftovers:
    """The controller's side: what each xdist worker found at its end."""

    def __init__(self, config):
        self.config = config

    def pytest_testnodedown(self, node, error):
        found = getattr(node, "workeroutput", {}).get("bench_leftovers") or []
        self.config.stash[_LEFTOVERS] += [f"[{node.gateway.id}] {line}" for line in found]


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` deselected what they do
def pytest_collection_modifyitems(config, items):
    """Under xdist, each worker's first tests are its share of the slow ones.

    The worksteal scheduler hands each of the N workers one contiguous 1/N of the
    collection and later moves tests only from the end of a worker's queue. In
    collection order the slow tests (real agents, proofs: up to 90 s each) sit together
    near the end, so one worker got most of them and the run waited on its tail. Here
    the collection is cut the scheduler's way and each part starts with every N-th slow
    test, so they run side by side from the first minute. Every worker sorts the same
    collection the same way (xdist requires it)."""
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    if workers < 2:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    rest = [item for item in items if not item.get_closest_marker("slow")]
    ordered, left = [], len(items)
    for k in range(workers):
        size = left // (workers - k)  # what the scheduler sends the k-th worker
        part = slow[k::workers]
        take = max(0, size - len(part))
        ordered += part + rest[:take]
        rest = rest[take:]
        left -= size
    items[:] = ordered + rest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's node id in the environment of every process it starts (its setup and
    teardown included): a leftover is named with it (leaks.py)."""
    leaks.running(item.nodeid)
    try:
        return (yield)
    finally:
        leaks.running(None)


def pytest_sessionfinish(session, exitstatus):
    zygote.close()  # the run's process too; the daemons it forked are checked below
    found = leaks.leftovers()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports it
        workeroutput["bench_leftovers"] = found
        return
    session.config.stash[_LEFTOVERS] += found
    if session.config.stash[_LEFTOVERS]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    found = config.stash.get(_LEFTOVERS, [])
    if found:
        terminalreporter.section("left behind by the tests", sep="=", red=True, bold=True)
        for line in found:
            terminalreporter.line(line, red=True)
        terminalreporter.line(
            "The run fails: a test must stop what it starts and remove its BENCH_DIR "
            "(these were ended and removed now).",
            red=True,
        )


@pytest.fixture
def bench_dir():
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(d + "-files", ignore_errors=True)  # Benchd.scratch


def _cli_in_process(module) -> bool:
    """False for a module about the `bench` process itself (`BENCH_CLI = "process"`):
    its `bench` commands all run as processes (tests/support/inproc.py)."""
    return getattr(module, "BENCH_CLI", "") != "process"


@pytest.fixture
def make_daemon(bench_dir, request):
    started: list[Benchd] = []

    def make(*opts: str, start: bool = True, fast: bool = True) -> Benchd:
        b = Benchd(bench_dir, [*(FAST if fast else []), *opts])
        b.cli_in_process = _cli_in_process(request.module)
        if start:
            b.start()
        started.append(b)
        return b

    yield make
    for b in started:
        if b.proc is not None:
            b.stop()


@pytest.fixture
def daemon(make_daemon) -> Benchd:
    return make_daemon()


@pytest.fixture(scope="module")
def shared(request):
    """One benchd (with the fast timings) for the module's tests that share it."""
    d = short_tmpdir()
    b = Benchd(d, list(FAST))
    b.cli_in_process = _cli_in_process(request.module)
    try:
        b.start()
        yield b
    finally:
        if b.proc is not None:
            b.stop()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(d + "-files", ignore_errors=True)


_HANDLES = itertools.count(1)


@pytest.fixture
def who() -> str:
    """A handle no other test of this run uses (for mail in the `shared` daemon)."""
    return f"u{next(_HANDLES)}"
