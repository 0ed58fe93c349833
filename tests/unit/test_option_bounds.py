"""Every daemon option's default lies inside the range declared with it
(bench_wire.config.DaemonOptions), a value outside is refused with the bound named, the
same sentence from `bench up` and from benchd (both call option_problem), and
docs/cli.md's options table is the one the declarations write."""

import dataclasses
import math
import pathlib

import pytest

from bench_wire import config
from bench_wire.config import OPTIONS, option_problem, seconds_text
from benchd.server.options import DaemonConfig, options_problem
from tools import docgen


def test_every_default_is_in_its_range():
    for o in OPTIONS:
        assert option_problem(o.flag, o.default) is None, o.flag
        assert math.isfinite(o.high) and o.low <= o.high, o.flag


def test_a_default_not_of_its_options_type_fails_at_import():
    @dataclasses.dataclass(frozen=True)
    class Wrong:
        count: int = config.option(1.5, 0, 10, "", "a count with a float default")  # type: ignore[assignment]

    with pytest.raises(TypeError):
        config._option(dataclasses.fields(Wrong)[0])


@pytest.mark.parametrize(
    "flag,value,said",
    [
        ("--spawn-rate", 1e9, "--spawn-rate must be at most 10,000 (got 1,000,000,000)"),
        ("--operator-reserve", 0, "--operator-reserve must be at least 1 (got 0)"),
        ("--max-deadline", 1e30, "--max-deadline must be at most 365d (got 1e+30s)"),
        ("--idle-gate", -1.0, "--idle-gate must not be negative (got -1s)"),
        ("--idle-timeout", 0.0, "--idle-timeout must be positive (got 0s)"),
        ("--send-rate", float("nan"), "--send-rate must be a number from 0.0001 to 10,000"),
        ("--mailbox-bytes", 1 << 40, "--mailbox-bytes must be at most 17,179,869,184"),
    ],
)
def test_a_value_out_of_range_names_the_bound(flag, value, said):
    problem = option_problem(flag, value)
    assert problem is not None and problem.startswith(said), problem


def test_the_daemon_refuses_what_bench_up_refuses():
    config = dataclasses.replace(DaemonConfig(), spawn_rate=10**9)
    assert options_problem(config) == option_problem("--spawn-rate", 10**9)
    assert options_problem(dataclasses.replace(DaemonConfig(), operator_reserve=0))


def test_durations_are_shown_as_durations():
    assert [seconds_text(s) for s in (30 * 86400, 7 * 86400, 5400, 45, 1.5)] == [
        "30d",
        "7d",
        "90m",
        "45s",
        "1.5s",
    ]


def test_docs_cli_has_the_options_table_the_declarations_write():
    path = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md"
    text = path.read_text()
    assert docgen.with_table(text) == text, "run: just docs"
    for o in OPTIONS:  # each row names its bounds as they are shown
        row = f"| `{o.flag} {'S' if o.unit == 's' else 'N'}` | `{o.env}` |"
        assert row in text, row
