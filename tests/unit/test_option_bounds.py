"""Every daemon option has a range declared beside it (bench_wire.config.BOUNDS), its
default lies inside it, and a value outside is refused with the bound named, the same
sentence from `bench up` and from benchd (both call option_problem)."""

import dataclasses
import math

import pytest

from bench_wire.config import BOUNDS, DAEMON_OPTIONS, option_problem, seconds_text
from benchd.server.config import DaemonConfig
from benchd.server.options import options_problem


def test_every_option_has_a_range_and_its_default_is_in_it():
    flags = [flag for flag, *_ in DAEMON_OPTIONS]
    assert sorted(BOUNDS) == sorted(flags), "an option without a range (or a stale one)"
    for flag, _env, _typ, default, _help in DAEMON_OPTIONS:
        assert isinstance(default, int | float)
        assert option_problem(flag, default) is None, flag
        low, high, _unit = BOUNDS[flag]
        assert math.isfinite(high) and low <= high, flag


@pytest.mark.parametrize(
    "flag,value,said",
    [
        ("--spawn-rate", 1e9, "--spawn-rate must be at most 10,000 (got 1,000,000,000)"),
        ("--operator-reserve", 0, "--operator-reserve must be at least 1 (got 0)"),
        ("--max-deadline", 1e30, "--max-deadline must be at most 365d (got 1e+30s)"),
        ("--idle-gate", -1.0, "--idle-gate must not be negative (got -1s)"),
        ("--wait-max", 0.0, "--wait-max must be positive (got 0s)"),
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


def test_docs_cli_lists_every_range():
    import pathlib

    from bench_wire.config import value_text

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for flag, (low, high, unit) in BOUNDS.items():
        row = f"| `{flag}` | {value_text(low, unit)} | {value_text(high, unit)} |"
        assert row in text, row
