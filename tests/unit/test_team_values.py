"""Every key of a team file with every kind of value: accepted, or one bad-team-file
error, never another exception (issue 38: "every other bad value is one clear error,
never a traceback")."""

import itertools

import pytest

from bench_cli import team
from bench_wire.config import OPTIONS
from bench_wire.errors import WireError

VALUES = [
    "1",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "nan",
    "inf",
    "99999999999999999999",
    "true",
    '""',
    '"x"',
    '"Bob"',
    '"1e23d"',
    '"-5m"',
    '"nan s"',
    '"."',
    '"/"',
    '"\\u0000"',
    "[]",
    '["a", "b"]',
    "[1, 2]",
    "{}",
    "{ A = 1 }",
    '{ "" = "x" }',
    '{ "A=B" = "x" }',
    "2026-12-07T10:00:00Z",
]


def _try(tmp_path, text: str) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(text)
    try:
        team.load(str(path), str(tmp_path / "state"))
    except WireError as err:
        assert err.code == "bad-team-file" and "\n" not in err.message, err.message


@pytest.mark.parametrize("key", sorted(team.AGENT_KEYS))
def test_every_agent_key_with_every_value(tmp_path, key):
    for value, task in itertools.product(VALUES, ('task = "t"\n', "")):
        _try(tmp_path, f'[agents.a]\ncommand = "true"\n{task}{key} = {value}\n')


def test_every_daemon_key_with_every_value(tmp_path):
    keys = [o.key for o in OPTIONS] + ["node", "bridge", "idel-gate"]
    for key, value in itertools.product(keys, VALUES):
        _try(tmp_path, f"[daemon]\n{key} = {value}\n")


def test_tables_of_every_shape(tmp_path):
    for text in [
        "agents = 1\n",
        "daemon = []\n",
        "[agents]\na = 1\n",
        '[agents."a b"]\ncommand = "x"\n',
        '[agents.""]\ncommand = "x"\n',
        "[[agents]]\nx = 1\n",
        "x = " + "{ a = " * 3000 + "1" + " }" * 3000 + "\n",
        "x = " + "[" * 3000 + "]" * 3000 + "\n",
    ]:
        _try(tmp_path, text)


def test_the_cli_knows_the_daemons_presets_and_sizes():
    # The CLI imports nothing of benchd: its copies of these are checked here.
    from benchd.runtime import sessions, terminal

    assert set(team.BUILTIN_PRESETS) == set(sessions.BUILTIN_PRESETS)
    assert (team.ROWS_MAX, team.COLS_MAX) == (terminal.MAX_ROWS, terminal.MAX_COLS)


def test_presets_json_names_count_as_presets(tmp_path):
    (tmp_path / "presets.json").write_text('{"aider": {"ready": "^> $"}}')
    assert team.preset_names(str(tmp_path)) == {"claude", "codex", "pi", "aider"}
    (tmp_path / "bench.toml").write_text('[agents.a]\nagent = "aidr"\n')
    with pytest.raises(WireError) as err:
        team.load(str(tmp_path / "bench.toml"), str(tmp_path))
    assert err.value.message.endswith("(did you mean aider?)"), err.value.message
