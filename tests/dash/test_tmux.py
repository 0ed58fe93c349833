"""bench dash in a real terminal: tmux runs it against a real daemon with two stand-ins.

A mail to bob shows as bob's unread count changing, then his screen with the wake line;
`a` attaches to bob and Ctrl-] comes back; Ctrl-C leaves the terminal settings exactly
as they were (`stty -g` before and after). Without a daemon it waits, says so, and
connects once one starts; without a terminal it refuses to start.

Each test runs its own tmux server (`tmux -S <socket>`, in a directory of its own), so
a tmux user never sees the tests' sessions in their own server, and the server is
killed at the end of the test.
"""

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import BENCH, short_tmpdir, spawn_standin

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (CI installs it; apt-get install tmux)"
)
pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")


@pytest.fixture
def tmux():
    """`tmux ARGS` on a server of the test's own; the server is killed afterwards."""
    home = short_tmpdir("tx")  # short: a socket's path is at most ~100 bytes
    server = os.path.join(home, "tmux")
    # Not the user's server even when the suite runs inside tmux: $TMUX would point at it.
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}

    def run(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", server, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
            env=env,
        ).stdout

    yield run
    subprocess.run(["tmux", "-S", server, "kill-server"], capture_output=True, env=env, timeout=20)
    shutil.rmtree(home, ignore_errors=True)


def test_dash_in_tmux_shows_mail_and_wake_and_restores_the_terminal(make_daemon, tmp_path, tmux):
    # The unread count shows before the wake lands: a keystroke just before the send
    # holds the wake for the gate (counted from the last output or input, and bob's
    # last output may be long past on a loaded machine).
    d = make_daemon("--idle-gate", "4")
    for name in ("alice", "bob"):
        spawn_standin(d, name, timeout=30)
    before, after = tmp_path / "stty.before", tmp_path / "stty.after"
    name = f"dash{os.getpid()}"
    script = (
        f"stty -g > {before}; {BENCH} dash --dir {d.dir}; echo $? > {tmp_path}/rc; "
        f"stty -g > {after}; exec sleep 600"
    )
    env = ["-e", f"BENCH_DIR={d.dir}", "-e", "TERM=xterm-256color"]
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "36", *env, "sh", "-c", script)
    try:

        def screen() -> str:
            return tmux("capture-pane", "-p", "-t", name)

        def bob_unread():
            # The mail pane's title: it shows bob's mailbox once bob is selected.
            m = re.search(r"mail: bob\s+\((\d+) unread", screen())
            return m and int(m[1])

        try:
            d.wait_until(
                lambda: re.search(r"│\s*bob\s+running", screen()) and "alice" in screen(),
                30,
                "both sessions",
            )
        except AssertionError:
            raise AssertionError(screen()) from None
        tmux("send-keys", "-t", name, "Down")  # select bob: his screen and mailbox follow
        d.wait_until(
            lambda: "screen: bob" in screen() and bob_unread() == 0, 20, "bob's screen and mail"
        )
        d.ok("type", "bob", " ", "--no-enter")
        d.ok("mail", "send", "bob", "-s", "hello", "-m", "ping")
        try:
            d.wait_until(lambda: bob_unread() == 1, 20, "bob's unread count at 1")
        except AssertionError:
            raise AssertionError(screen()) from None
        d.wait_until(lambda: "You have mail from operator" in screen(), 30, "the wake line")
        d.wait_until(lambda: bob_unread() == 0 and "woken" in screen(), 20, "bob woken")
        # a: the dashboard steps aside for `bench attach bob`; Ctrl-] comes back to it.
        tmux("send-keys", "-t", name, "a")
        d.wait_until(
            lambda: "sessions" not in screen() and "standin>" in screen(),
            20,
            "bob's terminal, attached",
        )
        tmux("send-keys", "-t", name, "C-]")
        # The dashboard draws itself anew after the attach: on a loaded machine (two suites
        # at once, load 15) that took longer than 20 s once.
        try:
            d.wait_until(
                lambda: "sessions" in screen() and bob_unread() == 0, 60, "back in the dash"
            )
        except AssertionError:
            raise AssertionError(screen()) from None
        tmux("send-keys", "-t", name, "C-c")  # ^C quits, as in any terminal program
        d.wait_until(lambda: after.exists() and after.read_text().strip(), 20, "dash quit")
        assert (tmp_path / "rc").read_text().strip() == "0"
        assert before.read_text() == after.read_text()
    finally:
        tmux("kill-session", "-t", name)  # the fixture then kills the server


def test_dash_without_a_daemon_waits_says_so_and_connects_when_one_starts(make_daemon, tmux):
    d = make_daemon(start=False)
    name = f"dashnd{os.getpid()}"
    env = ["-e", f"BENCH_DIR={d.dir}", "-e", "TERM=xterm-256color"]
    cmd = f"{BENCH} dash --dir {d.dir}; exec sleep 600"
    tmux("new-session", "-d", "-s", name, "-x", "80", "-y", "24", *env, "sh", "-c", cmd)
    try:

        def screen() -> str:
            return tmux("capture-pane", "-p", "-t", name)

        # the wait grows (0.25 s, 0.5 s, ...) and the status line shows it
        d.wait_until(lambda: "next try in 2s" in screen(), 30, "a longer wait shown")
        assert "daemon not running: reconnecting" in screen()
        d.start()
        d.wait_until(lambda: "connected to" in screen(), 30, "connected")
        tmux("send-keys", "-t", name, "q")
        d.wait_until(lambda: "sessions" not in screen(), 20, "dash quit")
    finally:
        tmux("kill-session", "-t", name)  # the fixture then kills the server


@pytest.mark.parametrize(
    "redirect", ["> out.txt", "< /dev/null", "2> err.txt"], ids=["stdout", "stdin", "stderr"]
)
def test_dash_without_a_terminal_refuses_in_one_line(make_daemon, tmp_path, redirect, tmux):
    """No escape codes into a file, no app waiting for keys that cannot come."""
    d = make_daemon(start=False)  # no daemon either: the refusal comes first
    name = f"dashnt{os.getpid()}{redirect[0]}"
    script = (
        f"cd {tmp_path}; {BENCH} dash --dir {d.dir} {redirect}; echo rc=$? > rc; exec sleep 600"
    )
    tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "24", "sh", "-c", script)
    try:
        rc = tmp_path / "rc"
        d.wait_until(lambda: rc.exists() and rc.read_text().strip(), 30, "dash to exit")
        assert rc.read_text().strip() == "rc=2"
        which = {"> out.txt": "output", "< /dev/null": "input", "2> err.txt": "error"}[redirect]
        text = tmux("capture-pane", "-p", "-J", "-t", name).strip()
        if redirect.startswith("2>"):
            text = (tmp_path / "err.txt").read_text().strip()
        assert text.count("\n") == 0, text
        assert f"standard {which} is not one" in text and "[usage]" in text, text
        out = tmp_path / "out.txt"
        assert not out.exists() or out.read_bytes() == b""
    finally:
        tmux("kill-session", "-t", name)  # the fixture then kills the server
