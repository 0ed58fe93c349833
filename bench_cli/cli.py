"""The bench CLI's root: the `bench` group, `help` and `completion`. Every other command
is in a module of `bench_cli.commands`, imported only when it is asked for."""

import importlib
import sys
from typing import Any

import click

from bench_cli import hints, output
from bench_cli.context import DIR_HELP, JSON_HELP, Group, examples
from bench_wire.errors import EXIT_INTERRUPTED, EXIT_OK, WireError


class LazyGroup(Group):
    """click's lazy loading: a command's module ("module:function") is imported the first
    time the command is asked for."""

    def __init__(
        self,
        name: str | None = None,
        *,
        lazy_subcommands: dict[str, str],
        **kwargs: Any,  # click.Group's own keyword arguments, passed on
    ) -> None:
        super().__init__(name, **kwargs)
        self.lazy = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            self.commands[cmd_name] = getattr(importlib.import_module(module), attr)
        return self.commands.get(cmd_name)


COMMANDS = {
    "up": "bench_cli.commands.daemon:up",
    "down": "bench_cli.commands.daemon:down",
    "status": "bench_cli.commands.daemon:status",
    "daemon": "bench_cli.commands.daemon:daemon",
    "spawn": "bench_cli.commands.ps:spawn",
    "ps": "bench_cli.commands.ps:ps",
    "tail": "bench_cli.commands.ps:tail",
    "attach": "bench_cli.commands.ps:attach",
    "type": "bench_cli.commands.ps:type_",
    "kill": "bench_cli.commands.ps:kill",
    "report": "bench_cli.commands.ps:report",
    "restart": "bench_cli.commands.ps:restart",
    "hook": "bench_cli.commands.ps:hook",
    "approve": "bench_cli.commands.ps:approve",
    "deny": "bench_cli.commands.ps:deny",
    "dash": "bench_cli.commands.ps:dash",
    "mail": "bench_cli.commands.mail:mail",
    "mcp": "bench_cli.commands.mail:mcp",
    "job": "bench_cli.commands.mail:job",
    "events": "bench_cli.commands.events:events",
    "bridge": "bench_cli.commands.nodes:bridge",
    "nodes": "bench_cli.commands.nodes:nodes",
    "service": "bench_cli.commands.daemon:service",
}


@click.group(
    cls=LazyGroup,
    lazy_subcommands=COMMANDS,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "show_default": True,
        "max_content_width": 100,
    },
)
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.version_option(package_name="bench", prog_name="bench")
def cli(bench_dir: str | None, as_json: bool) -> None:
    """bench: mail and wakes for AI coding agents side by side on one machine.

    --dir and --json go before or after the command. `bench help COMMAND` shows a
    command's options and examples.

    \b
    Exit codes:
      0    ok
      1    refused (by the daemon, or the running daemon has other options)
      2    bad command line, whoever found it (click or bench)
      3    no daemon answers on this BENCH_DIR
      4    the daemon's answer could not be understood, or the connection broke
      5    the socket is served by another user's process: nothing was sent
      6    a wait (mail wait, job wait) ended at its timeout
      130  interrupted with Ctrl-C (nothing is printed)
    """
    # Each command reads what was given before it (context.given); its own win.


@cli.command(name="help")
@click.argument("command", nargs=-1)
def help_(command: tuple[str, ...]) -> None:
    """Show help for bench or for a COMMAND (e.g. bench help mail send)."""
    here = click.Context(cli, info_name="bench", **cli.context_settings)
    target: click.Command = cli
    for name in command:
        sub = target.get_command(here, name) if isinstance(target, click.Group) else None
        if sub is None:
            names = target.list_commands(here) if isinstance(target, click.Group) else []
            meant = hints.command(tuple(command[:-1]), name, names)
            tip = f" (did you mean {meant}?)" if meant else " (see bench help)"
            raise click.UsageError(f"no such command: {' '.join(command)}{tip}")
        here = click.Context(sub, info_name=name, parent=here)
        target = sub
    click.echo(here.get_help())


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (handles complete live)."""
    from click.shell_completion import get_completion_class

    comp_class = get_completion_class(shell)
    assert comp_class is not None, "click.Choice admits only the shells click completes"
    click.echo(comp_class(cli, {}, "bench", "_BENCH_COMPLETE").source())


completion.epilog = examples(
    'eval "$(bench completion bash)"      # in ~/.bashrc',
    'eval "$(bench completion zsh)"       # in ~/.zshrc',
    "bench completion fish > ~/.config/fish/completions/bench.fish",
)


def usage_sentence(err: click.ClickException) -> str:
    """A command-line error as one sentence, its hint and where to read more (`bench help
    mail send`), never click's four lines."""
    if isinstance(err, click.NoSuchOption):
        said = f"no such option: {err.option_name}"
        if err.possibilities:
            said += f" (did you mean {' or '.join(sorted(err.possibilities))}?)"
    else:
        said = err.format_message().strip().rstrip(".")
        said = said[:1].lower() + said[1:]
    ctx = getattr(err, "ctx", None)
    command = ctx.command_path.split(" ", 1)[1:] if ctx is not None else _typed_command()
    if command and command[0] != "help":
        said += f"; see bench help {command[0]}"
    elif isinstance(err, click.UsageError) and "bench help" not in said:
        said += "; see bench help"
    return said


# A group run without its command (click 8.2 on; 8.1 prints the help and exits 0).
NO_ARGS: tuple[type[click.ClickException], ...] = tuple(
    c for c in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if c is not None
)


def _typed_command() -> list[str]:
    """The command typed (`mail send`), for an error click raised without its context."""
    words: list[str] = []
    group: click.Command = cli
    ctx = click.Context(cli)
    argv = iter(sys.argv[1:])
    for word in argv:
        if not words and word.startswith("-"):  # bench's own --json, --dir PATH
            if word == "--dir":
                next(argv, None)
            continue
        sub = group.get_command(ctx, word) if isinstance(group, click.Group) else None
        if sub is None:
            break
        words.append(word)
        group = sub
    return [" ".join(words)] if words else []


def run() -> int:
    """bench with click, every error as `bench: <sentence> [<code>]` (or JSON) and its
    code's exit code (docs/cli.md)."""
    try:
        # standalone_mode=False: click raises its errors to here instead of printing
        # them its own way, and gives back the code a command exited with.
        code = cli.main(prog_name="bench", standalone_mode=False)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as err:
        if isinstance(err, NO_ARGS):  # `bench`, `bench mail`: the help, as click shows it
            err.show()
            return err.exit_code
        return output.fail(WireError("usage", usage_sentence(err)), "--json" in sys.argv)
    except WireError as err:
        return output.fail(err, "--json" in sys.argv)
    except (KeyboardInterrupt, click.Abort):
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK  # the reader went away (`bench ps | head`): nothing more to say
    return code if isinstance(code, int) else EXIT_OK
