"""The suite's leak check (tests/support/leaks.py) names the test that started a
leftover process and shows its whole command line (issue 40, defect 5: a leftover
bwrap was shown cut at 200 characters, and with no test named)."""

import os
import signal
import subprocess
import sys

from tests.support import leaks


def test_a_leftover_is_named_with_its_test_and_its_whole_command_line(request):
    # What a sandboxed session looks like: a long wrapper, the program at its end.
    wrapper = ["--bind", "/tmp/some-long-bench-dir/benchd.sock"] * 20
    argv = [sys.executable, "-c", "import time; time.sleep(600)", *wrapper, "--", "the-program"]
    proc = subprocess.Popen(argv)
    try:
        assert os.environ[leaks.TEST_VAR] == request.node.nodeid  # set by conftest
        found = {}

        def seen() -> bool:
            found.update(leaks._ours())
            return proc.pid in found and "the-program" in found[proc.pid][0]

        from tests.support.wait import wait_for

        wait_for(seen, 20, "the process found")
        cmd, test = found[proc.pid]
        assert test == request.node.nodeid
        said = leaks.line(proc.pid, cmd, test)
        assert request.node.nodeid in said and said.endswith("-- the-program"), said
        assert len(cmd) > 200 and cmd in said  # whole: it is shorter than CMD_SHOWN
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_a_very_long_command_line_keeps_its_end():
    cmd = "bwrap " + "--bind /x /x " * 1000 + "-- python agent.py"
    out = leaks.shown(cmd)
    assert len(out) < leaks.CMD_SHOWN + 100
    assert out.startswith("bwrap --bind") and out.endswith("-- python agent.py")
    assert "characters ...]" in out
