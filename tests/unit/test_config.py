"""benchd's typed configuration (benchd/server/options.py): every option of the parser is
a field of `DaemonConfig`, the value is frozen, hello reports each option where its
declaration says (what `bench up` compares), and the session umask travels in the
config to each Terminal (no module global is patched)."""

import dataclasses
import os
import pathlib

import msgspec
import pytest
import trio

from bench_cli.commands.daemon import _running_options
from bench_wire.config import OPTIONS
from benchd.runtime.terminal import Terminal
from benchd.server.options import (
    DaemonConfig,
    build_parser,
    options_problem,
    reactor_settings,
)
from benchd.server.wiring import caps

# Not options of the parser: main reads it (the umask benchd was started with).
NOT_OPTIONS = {"session_umask"}


def _option_dests() -> set[str]:
    return {
        action.dest for action in build_parser()._actions if action.dest not in ("help", "version")
    }


def test_every_option_of_the_parser_is_a_config_field():
    fields = {f.name for f in dataclasses.fields(DaemonConfig)}
    missing = _option_dests() - fields
    assert not missing, f"options without a DaemonConfig field: {sorted(missing)}"
    # ... and no field is left over from an option that is gone.
    assert fields - NOT_OPTIONS == _option_dests()


def test_the_parsed_options_become_the_config(monkeypatch):
    for o in OPTIONS:
        monkeypatch.delenv(o.env, raising=False)
    monkeypatch.delenv("BENCH_ISOLATION", raising=False)
    args = ["--dir", "/tmp/x", "--node", "n1", "--send-rate", "7.5", "--max-children", "9"]
    config = DaemonConfig(**vars(build_parser().parse_args(args)), session_umask=0o022)
    assert config.dir == "/tmp/x" and config.node == "n1"
    assert config.send_rate == 7.5 and config.max_children == 9
    assert config.isolation == "auto" and config.test_hooks is False
    assert config.session_umask == 0o022
    assert options_problem(config) is None
    bad = dataclasses.replace(config, send_rate=0.0)
    assert options_problem(bad) == "--send-rate must be positive (got 0)"


def test_an_option_is_read_from_its_environment_variable(monkeypatch):
    monkeypatch.setenv("BENCH_SEND_RATE", "7.5")
    monkeypatch.setenv("BENCH_MAX_CHILDREN", "9")
    config = DaemonConfig(**vars(build_parser().parse_args([])))
    assert config.send_rate == 7.5 and config.max_children == 9
    monkeypatch.setenv("BENCH_MAX_CHILDREN", "nine")
    with pytest.raises(SystemExit) as exit_:
        build_parser()
    assert exit_.value.code == 2


def test_hello_reports_each_option_where_its_declaration_says():
    changed = {o.dest: o.type(o.default + 1) for o in OPTIONS}
    config = dataclasses.replace(DaemonConfig(), **changed)
    hello = {
        "caps": msgspec.to_builtins(caps(config, False, "")),
        "reactor": msgspec.to_builtins(reactor_settings(config)),
    }
    reported = {o.flag: changed[o.dest] for o in OPTIONS if o.hello}
    assert _running_options(hello) == reported
    assert "--max-connections" in reported and "--idle-gate" in reported


def test_an_option_without_a_field_fails_at_once():
    ns = build_parser().parse_args([])
    ns.forgotten_option = 1
    with pytest.raises(TypeError):
        DaemonConfig(**vars(ns))


def test_the_config_is_frozen():
    config = DaemonConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.send_rate = 1.0  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        config.new_field = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("umask, shown", [(0o027, b"0027"), (0o002, b"0002")])
def test_a_session_starts_with_the_umask_it_is_given(tmp_path, umask, shown):
    async def run() -> bytes:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        term = Terminal(["sh", "-c", "umask"], str(tmp_path), env, 24, 80, 4096, umask=umask)
        try:
            with trio.fail_after(30):
                await term.drain()
                await term.wait_exit()
        finally:
            term.close()
        return bytes(term.scrollback)

    assert shown in trio.run(run)


def test_only_the_command_line_module_knows_argparse():
    """Nothing past `main` sees the parser's Namespace: in benchd only the module that
    builds the parser names argparse."""
    root = pathlib.Path(__file__).resolve().parents[2] / "benchd"
    naming = sorted(
        str(path.relative_to(root)) for path in root.rglob("*.py") if "argparse" in path.read_text()
    )
    assert naming == ["server/options.py"]
