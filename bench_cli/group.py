"""How bench finds its commands: click groups that print whole summaries, hint at what an
unknown command probably meant, print a daemon's refusal as one line, and (the root)
import each command's module only when that command is asked for."""

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

from bench_cli import hints, output
from bench_wire.errors import EXIT_INTERRUPTED, WireError


class Group(click.Group):
    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list with each summary whole (click cuts them to fit a line)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=500)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:
            said = hints.not_here(tuple(ctx.command_path.split()[1:]), args[0])
            if said is not None:
                raise click.UsageError(f"no such command {args[0]!r}: {said}", ctx) from None
            meant = hints.command(tuple(ctx.command_path.split()[1:]), args[0], self.commands)
            if meant is None:
                raise
            msg = f"no such command {args[0]!r} (did you mean {meant}?)"
            raise click.UsageError(msg, ctx) from None

    def invoke(self, ctx: click.Context) -> Any:  # what the command returns
        try:
            return super().invoke(ctx)
        except WireError as err:
            as_json = "--json" in sys.argv
            ctx.exit(output.fail(err, as_json))
        except KeyboardInterrupt:
            # Ctrl-C (e.g. ending `events -f`): the user asked for it, so print nothing.
            ctx.exit(EXIT_INTERRUPTED)


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's command table that imports a command's module ("module:function") the
    first time the command is looked up. Its keys are every name without importing
    anything, so listing names (hints, completion of names) stays cheap, and anything
    that walks `group.commands` (the help, tests) still sees every command."""

    def __init__(self, lazy: dict[str, str]) -> None:
        self.lazy = dict(lazy)
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            if name not in self.lazy:
                raise KeyError(name)
            module, _, attr = self.lazy[name].partition(":")
            cmd = getattr(importlib.import_module(module), attr)
            if not isinstance(cmd, click.Command):
                raise TypeError(f"{self.lazy[name]} is not a click command")
            self.loaded[name] = cmd
        return self.loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self.loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        if name not in self.loaded and name not in self.lazy:
            raise KeyError(name)
        self.loaded.pop(name, None)
        self.lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self.loaded, *self.lazy}))

    def __len__(self) -> int:
        return len({*self.loaded, *self.lazy})


class LazyGroup(Group):
    """click's lazy loading (`get_command` and `list_commands` over a table of
    "module:function"): `bench status` imports bench_cli.commands.daemon and no other
    command module."""

    def __init__(
        self,
        name: str | None = None,
        *,
        lazy_subcommands: dict[str, str],
        **kwargs: Any,  # click.Group's own keyword arguments, passed on
    ) -> None:
        super().__init__(name, commands=LazyCommands(lazy_subcommands), **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # sorted, as click lists a group's commands

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name)
