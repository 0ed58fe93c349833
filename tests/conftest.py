"""Shared fixtures: a real benchd process in a short temporary BENCH_DIR, and the real CLI.

The helpers behind them live in tests/support (one daemon class, one wait, one spawn,
one refusal assertion); they are re-exported here for the tests that import them from
`tests.conftest`.
"""

import shutil

import pytest

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


@pytest.fixture
def bench_dir():
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(d + "-files", ignore_errors=True)  # Benchd.scratch


@pytest.fixture
def make_daemon(bench_dir):
    started: list[Benchd] = []

    def make(*opts: str, start: bool = True, fast: bool = True) -> Benchd:
        b = Benchd(bench_dir, [*(FAST if fast else []), *opts])
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
