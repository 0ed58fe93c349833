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
def test_a_shell_session_gets_its_wake_as_a_comment(shared, who, argv):
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed here")
    shared.ok("spawn", "--name", who, "--env", "PS1=ready$ ", "--", *argv)
    wait_screen(shared, who, "ready$")
    sent = shared.ok("mail", "send", who, "-m", "hello")
    shared.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"])
    # The shell read the line and showed its prompt again: it ran nothing.
    shared.wait_until(
        lambda: screen(shared, who).rstrip().endswith("ready$"), 30, "the next prompt"
    )
    text = screen(shared, who)
    assert "ready$ # You have mail from operator: " in text, text
    assert "not found" not in text and "syntax error" not in text, text


def test_an_agent_gets_the_wake_line_unchanged(shared, who):
    spawn_standin(shared, who)
    sent = shared.ok("mail", "send", who, "-m", "hello")
    shared.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"])
    wait_screen(shared, who, "ok: You have mail from operator: ")
    assert "# You have mail" not in screen(shared, who)


def test_a_shell_running_a_command_is_an_agent(shared, who):
    # `bash -c CMD` is a program, not a prompt: the line is typed as it is.
    script = 'echo waiting; read -r line; echo "got [$line]"; exec sleep 600'
    spawn(shared, "bash", "-c", script, name=who)
    wait_screen(shared, who, "waiting")
    sent = shared.ok("mail", "send", who, "-m", "hello")
    shared.wait_event("agent/woken", lambda e: e.get("mail_id") == sent["mail_id"], timeout=60)
    wait_screen(shared, who, "got [You have mail from operator: ")
