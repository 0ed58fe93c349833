"""Untrusted text cannot style or reorder a real terminal: bench's human output run in
tmux, the pane read back with its styles (`capture-pane -e`).

Private-use characters once carried bench's own colour marks, so a body holding them came
out red; bidi controls reordered a subject. Both must show as visible escapes, and the
only colour on the screen must be bench's own (a session's state in `ps`).
"""

import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.conftest import BENCH, spawn

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (CI installs it; apt-get install tmux)"
)

# The old colour marks (U+E01F: red on, U+E0FF: off) and the bidi controls.
BODY = "plain \ue01fPRIVATE-RED\ue0ff after \u202eDESREVER\u202c and \u2067iso\u2069 end"
SUBJECT = "\u202eelbisivni\u202c \ue01fsubject"
SGR = re.compile(r"\x1b\[[0-9;]*m")


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=True, timeout=20
    ).stdout


def run_in_tmux(d, tmp_path, *commands: list[str]) -> str:
    """The pane (with its styles as SGR) after running each bench command in turn."""
    name = f"untrusted{os.getpid()}"
    done = tmp_path / "done"
    script = "; ".join(shlex.join([BENCH, *argv]) for argv in commands)
    script += f"; touch {done}; exec sleep 600"
    env = ["-e", f"BENCH_DIR={d.dir}", "-e", "TERM=xterm-256color", "-e", "LANG=C.UTF-8"]
    tmux("new-session", "-d", "-s", name, "-x", "200", "-y", "50", *env, "sh", "-c", script)
    try:
        d.wait_until(done.exists, 60, "the commands to finish")
        return tmux("capture-pane", "-p", "-e", "-J", "-t", name)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_private_use_and_bidi_show_escaped_and_uncoloured(daemon, tmp_path):
    sent = daemon.ok("mail", "send", "operator", "-s", SUBJECT, "-m", BODY)
    pane = run_in_tmux(
        daemon,
        tmp_path,
        ["mail", "list"],
        ["mail", "read", sent["mail_id"]],
    )
    colours = [c for c in SGR.findall(pane) if c not in ("\x1b[0m", "\x1b[m", "\x1b[39m")]
    assert colours == [], (colours, pane)  # nothing in a body or subject turned into colour
    assert "\ue01f" not in pane and "\u202e" not in pane and "\u2067" not in pane, pane
    assert "plain \\ue01fPRIVATE-RED\\ue0ff after \\u202eDESREVER\\u202c" in pane, pane
    assert "and \\u2067iso\\u2069 end" in pane, pane
    assert "subject: \\u202eelbisivni\\u202c \\ue01fsubject" in pane, pane
    # The listing's subject column too.
    assert pane.count("\\u202eelbisivni\\u202c \\ue01fsubject") == 2, pane
    # --json stays exact: the characters themselves.
    exact = daemon.ok("mail", "read", sent["mail_id"])
    assert exact["body"] == BODY and exact["subject"] == SUBJECT


def test_bench_colour_stays_its_own_and_content_cannot_close_it(daemon, tmp_path):
    # A command line with the old marks: once it could paint the rest of the row.
    spawn(daemon, "sh", "-c", "exec sleep 600", "\ue0ff\ue020tail", name="painted")
    pane = run_in_tmux(daemon, tmp_path, ["ps"])
    row = next(line for line in pane.splitlines() if line.startswith("painted"))
    assert SGR.sub("", row).endswith("exec sleep 600 \\ue0ff\\ue020tail"), row
    # The one colour is bench's own: the state, green, and reset right after it.
    coloured = re.findall(r"\x1b\[(\d+)m([^\x1b]*)", row)
    assert [(c, t.strip()) for c, t in coloured if c not in ("0", "39")] == [("32", "running")], row
    assert json.loads(daemon.bench("ps", "--json").out)["sessions"][0]["argv"][-1] == (
        "\ue0ff\ue020tail"
    )
