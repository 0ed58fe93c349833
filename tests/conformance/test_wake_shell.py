"""Wakes in plain shells, through the daemon's real ptys: a shell at its prompt gets the
wake line as a comment it ignores (no `command not found`), an agent gets it as ever."""

import shutil

import pytest

from tests.conformance.test_sessions import screen, wait_screen
from tests.conftest import spawn, spawn_standin


@pytest.mark.parametrize(
    "argv",
    [["bash", "--norc", "--noprofile"], ["dash"], ["sh", "-i"]],
    ids=" ".join,
)
def test_a_shell_session_gets_its_wake_as_a_comment(daemon, argv):
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed here")
    daemon.ok("spawn", "--name", "shell", "--env", "PS1=ready$ ", "--", *argv)
    wait_screen(daemon, "shell", "ready$")
    sent = daemon.ok("mail", "send", "shell", "-m", "hello")
    daemon.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"])
    # The shell read the line and showed its prompt again: it ran nothing.
    daemon.wait_until(
        lambda: screen(daemon, "shell").rstrip().endswith("ready$"), 30, "the next prompt"
    )
    text = screen(daemon, "shell")
    assert "ready$ # You have mail from operator: " in text, text
    assert "not found" not in text and "syntax error" not in text, text


def test_an_agent_gets_the_wake_line_unchanged(daemon):
    spawn_standin(daemon, "agent")
    sent = daemon.ok("mail", "send", "agent", "-m", "hello")
    daemon.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"])
    wait_screen(daemon, "agent", "ok: You have mail from operator: ")
    assert "# You have mail" not in screen(daemon, "agent")


def test_a_shell_running_a_command_is_an_agent(daemon):
    # `bash -c CMD` is a program, not a prompt: the line is typed as it is.
    script = 'echo waiting; read -r line; echo "got [$line]"; exec sleep 600'
    spawn(daemon, "bash", "-c", script, name="rd")
    wait_screen(daemon, "rd", "waiting")
    sent = daemon.ok("mail", "send", "rd", "-m", "hello")
    daemon.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"], timeout=60)
    wait_screen(daemon, "rd", "got [You have mail from operator: ")
