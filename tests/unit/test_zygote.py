"""The suite's daemon fork server (tests/support/zygote.py) answers as Popen would: the
daemon's own stdout and stderr, its exit code, -N for a signal, its pid to signal; and
the run's leak check is told which test forked it."""

import os
import shutil
import signal

from tests.support import leaks, zygote
from tests.support.daemon import Benchd, short_tmpdir


def test_a_forked_daemon_reports_its_exit_code_and_its_own_stderr():
    d = short_tmpdir()
    proc = zygote.spawn(["--dir", d + "/b", "--idle-gate", "-1"], dict(os.environ), d)
    try:
        assert proc.wait(30) == 2
        assert proc.stderr.read().startswith("benchd: ")
    finally:
        proc.stdout.close()
        proc.stderr.close()
        shutil.rmtree(d)


def test_a_forked_daemon_runs_where_it_was_asked_and_dies_by_its_signal():
    was, zygote.ENABLED = zygote.ENABLED, True
    d = short_tmpdir()
    b = Benchd(d + "/b", [], cwd=d)
    try:
        b.start()
        assert isinstance(b.proc, zygote.ForkedProcess)
        assert os.readlink(f"/proc/{b.proc.pid}/cwd") == d
        assert b.call({"verb": "hello"})["ok"] is True
        assert leaks._forked[b.proc.pid][1] == os.environ[leaks.TEST_VAR]
        b.proc.kill()
        assert b.proc.wait(30) == -signal.SIGKILL
        assert b.proc.poll() == -signal.SIGKILL
    finally:
        zygote.ENABLED = was
        b.stop()
        shutil.rmtree(d)


def test_a_daemon_whose_zygote_died_can_still_be_stopped():
    """The zygote gone (its worker ending, or it failed), its daemon runs on re-parented:
    the test still signals it by pid and sees it end."""
    was, zygote.ENABLED = zygote.ENABLED, True
    d = short_tmpdir()
    b = Benchd(d + "/b", [])
    try:
        b.start()
        assert zygote._zygote is not None
        zygote._zygote.proc.kill()
        zygote._zygote.proc.wait()
        assert b.proc.poll() is None  # still running
        assert b.call({"verb": "hello"})["ok"] is True
        pid = b.proc.pid
        b.stop()
        assert not leaks.alive(pid)
    finally:
        zygote.ENABLED = was
        b.stop()
        zygote.close()
        shutil.rmtree(d)


def test_a_bad_request_fails_alone():
    """A request that is not one (no fds, not JSON) is closed without a pid; the zygote
    goes on forking the next test's daemon."""
    import socket

    d = short_tmpdir()
    first = zygote.spawn(["--dir", d + "/a", "--idle-gate", "-1"], dict(os.environ), d)
    assert first.wait(30) == 2
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(zygote._zygote.path)
        s.sendall(b"not json")
        assert s.recv(64) == b""
    second = zygote.spawn(["--dir", d + "/b", "--idle-gate", "-1"], dict(os.environ), d)
    try:
        assert second.wait(30) == 2
    finally:
        for p in (first, second):
            p.stdout.close()
            p.stderr.close()
        shutil.rmtree(d)
