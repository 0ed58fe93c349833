"""The pure parts of what reaches a terminal: the one rule for untrusted text, hints,
human numbers and names, and the wake line a shell ignores."""

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench_cli import hints, output
from bench_wire.untrusted import escape, mask, strip, unsafe
from benchd.core.wakegate import for_shell, shell_of, wake_line

BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
PRIVATE = [0xE000, 0xE01F, 0xE0FF, 0xF8FF, 0xF0000, 0xFFFFD, 0x100000, 0x10FFFD]


@pytest.mark.parametrize("c", [*range(0x20), 0x7F, *range(0x80, 0xA0), *BIDI, *PRIVATE])
def test_controls_bidi_and_private_use_are_escaped(c):
    if c in (9, 10):
        assert escape(chr(c)) == chr(c)
        return
    shown = escape("a" + chr(c) + "b")
    assert chr(c) not in shown and shown.startswith("a\\") and shown.endswith("b")
    assert mask("a" + chr(c) + "b") == "a\ufffdb"  # one for one: styles stay in place
    assert strip("a" + chr(c) + "b") == "ab"


def test_ordinary_text_is_left_alone():
    text = "héllo wörld — 日本語 😀 \u00a0 \u200b tab\tnewline\n"
    assert escape(text) == text and mask(text) == text
    assert escape("\u202e") == "\\u202e" and escape("\x1b") == "\\x1b"
    assert escape("\U000f0001") == "\\U000f0001"


@given(st.text())
def test_escaped_text_is_all_safe_and_escaping_again_changes_nothing(text):
    once = escape(text)
    assert not any(unsafe(ord(c)) for c in once)
    assert escape(once) == once
    assert len(mask(text)) == len(text)
    assert not any(unsafe(ord(c)) or c in "\t\n" for c in strip(text))


def test_the_dashboard_masks_screens_and_mail_alike():
    pytest.importorskip("rich", reason="the dashboard's screen lines are Rich text")
    from bench_cli.dash.lines import screen_lines
    from bench_cli.eventtext import event_line

    assert mask("x\u202ey\ue01fz\x1b") == "x\ufffdy\ufffdz\ufffd"
    frame = {"lines": ["ab\u202ecd"], "styles": [[[3, 1, "red", "default", ""]]]}
    (line,) = screen_lines(frame)
    assert line.plain == "ab\ufffdcd"
    assert [(s.start, s.end) for s in line.spans] == [(3, 4)]  # still on the "c"
    ev = {"seq": 1, "ts": 0, "kind": "session/exited", "handle": "h", "signal": 9}
    assert "signal=SIGKILL" in event_line(ev)


# ---------------------------------------------------------------- hints


def test_nearest_prefers_case_then_one_edit_and_refuses_to_guess_a_tie():
    assert hints.nearest("Bob", ["bob", "carol"]) == "bob"
    assert hints.nearest("bbo", ["bob", "carol"]) == "bob"  # a swap is one edit
    assert hints.nearest("caorl", ["bob", "carol"]) == "carol"
    assert hints.nearest("zebra", ["bob", "carol"]) is None
    assert hints.nearest("bo", ["bob", "bot"]) is None  # two equally close
    assert hints.nearest("bob", ["bob"]) is None  # itself is no hint


def test_command_hints_for_aliases_and_typos():
    top = ["attach", "events", "kill", "mail", "ps", "spawn", "tail", "type", "up", "down"]
    assert hints.command((), "send", top) == "bench mail send"
    assert hints.command((), "ls", top) == "bench ps"
    assert hints.command((), "logs", top) == "bench tail"
    assert hints.command((), "list", top) == "bench mail list"
    assert hints.command((), "mial", top) == "bench mail"
    assert hints.command(("mail",), "ls", ["list", "read", "send"]) == "bench mail list"
    assert hints.command((), "frobnicate", top) is None


def test_aliases_name_real_commands():
    from bench_cli import cli
    from bench_cli.commands.mail import mail

    ctx = click.Context(cli.cli)

    for group, table in hints.ALIASES.items():
        for word, meant in table.items():
            words = meant.split()
            if words[0].startswith("-"):
                continue
            cmd = cli.cli
            for w in words:
                if w.startswith("-"):
                    break
                assert w in cmd.list_commands(ctx), (group, word, meant)
                cmd = cmd.get_command(ctx, w)
            assert word not in (cli.cli if not group else mail).list_commands(ctx)


# ---------------------------------------------------------------- numbers and names (output)


def test_durations_counts_and_signals():
    assert [output.duration(s) for s in (0, 0.9, 59.9, 60, 620.8, 7200, 90000)] == [
        "0s",
        "0s",
        "59s",
        "1m",
        "10m",
        "2h",
        "1d",
    ]
    assert output.duration(-3) == "0s"
    assert output.count(1, "match", "matches") == "1 match"
    assert output.count(2, "match", "matches") == "2 matches"
    assert output.count(0, "session") == "0 sessions"
    assert output.signal_name(1) == "SIGHUP" and output.signal_name(9) == "SIGKILL"
    assert output.signal_name(999) == "SIG999"


# ---------------------------------------------------------------- wakes in shells


@pytest.mark.parametrize(
    ("argv", "shell"),
    [
        (["bash"], "bash"),
        (["/bin/bash", "--norc", "-l"], "bash"),
        (["-zsh"], "zsh"),
        (["fish"], "fish"),
        (["sh", "-i", "script.sh"], "sh"),
        (["dash"], "dash"),
        (["bash", "-c", "claude"], None),
        (["bash", "-lc", "claude"], None),
        (["sh", "run.sh"], None),
        (["fish", "--command", "x"], None),
        (["claude"], None),
        (["python3", "agent.py"], None),
        ([], None),
    ],
)
def test_which_sessions_are_shells(argv, shell):
    assert shell_of(argv) == shell


def test_a_shell_gets_a_line_it_ignores_and_an_agent_the_same_line():
    line = wake_line("bob", "/b/mail/alice/read/x.md")
    assert for_shell(line, None) == line == "You have mail from bob: /b/mail/alice/read/x.md"
    assert for_shell(line, "bash") == "# " + line
    assert for_shell(line, "fish") == "# " + line
    # zsh takes no comments at its prompt by default: the no-op `:` with the words quoted.
    assert for_shell("it's", "zsh") == ": 'it'\\''s'"
