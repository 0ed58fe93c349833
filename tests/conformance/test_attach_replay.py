"""`bench attach` shows a session's recent output as the session's own terminal laid it
out, whatever the size of the viewer's window: tmux windows of 150 and of 80 columns
attach to a session of 120 columns whose program wrapped a long line by autowrap and
then moved the cursor up to rewrite it (as a shell's line editor does).
"""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import BENCH

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (CI installs it; apt-get install tmux)"
)

# At 120 columns: a header, 130 A's wrapped onto two rows, the cursor up one row and back
# to the start, 130 B's over them, a footer. What the session shows: the header, a row of
# 120 B's, a row of 10 B's, the footer (and no A). Replayed raw into a 150-column window
# the A's stay on one row and the B's overwrite the header.
PROGRAM = (
    "import sys, time\n"
    "w = sys.stdout.write\n"
    "w('header line\\r\\n' + 'A' * 130 + '\\x1b[1A\\r' + '\\x1b[32m' + 'B' * 130 + '\\x1b[0m')\n"
    "w('\\r\\nfooter line\\r\\nprompt> ')\n"
    "sys.stdout.flush()\n"
    "time.sleep(600)\n"
)


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=True, timeout=20
    ).stdout


@pytest.mark.parametrize("width", [150, 80])
def test_attach_replays_at_the_sessions_width(daemon, width):
    daemon.ok(
        "spawn",
        "--name",
        "wide",
        "--rows",
        "20",
        "--cols",
        "120",
        "--",
        sys.executable,
        "-c",
        PROGRAM,
    )
    daemon.wait_until(
        lambda: "prompt>" in daemon.bench("tail", "wide", "--screen").out, 30, "the program"
    )
    name = f"att{os.getpid()}w{width}"
    env = ["-e", f"BENCH_DIR={daemon.dir}", "-e", "TERM=xterm-256color"]
    cmd = f"{BENCH} attach --dir {daemon.dir} wide"
    tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", "30", *env, cmd)
    try:

        def joined() -> list[str]:  # -J: a row wrapped by the viewer is one line again
            return [ln.rstrip() for ln in tmux("capture-pane", "-p", "-J", "-t", name).split("\n")]

        daemon.wait_until(lambda: "prompt>" in "\n".join(joined()), 30, "the replay")
        lines = joined()
        shown = "\n".join(lines)
        assert "A" not in shown.replace("[attached", ""), shown
        at = lines.index("header line")
        assert lines[at : at + 4] == ["header line", "B" * 120, "B" * 10, "footer line"], shown
        assert lines[at + 4].startswith("prompt>"), shown
        # the cursor is back where the program left it: a key typed shows after the prompt
        assert daemon.ok("ps")["sessions"][0]["state"] == "running"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
