"""What every click command shares: options, the typed client and its answer helpers,
the group class. Commands import from here, never from `bench_cli.cli` (no circle)."""

import functools
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
import msgspec

from bench_cli import hints
from bench_wire import messages as m
from bench_wire.client import Client, resolve_dir
from bench_wire.config import OPTIONS, option_problem
from bench_wire.errors import EXIT_INTERRUPTED, WireError
from bench_wire.messages import StructCodec

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

R = TypeVar("R", bound=m.Response)
# An answer as plain data (`call`), or an object in one, read by field name.
Json = dict[str, Any]

DIR_HELP = "BENCH_DIR (else $BENCH_DIR, else $XDG_STATE_HOME/bench or ~/.local/state/bench)"
JSON_HELP = "print the daemon's answer as JSON (one object, or one per line for a stream)"


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
            group, word = tuple(ctx.command_path.split()[1:]), args[0]
            names = self.list_commands(ctx)
            said = hints.NOT_HERE.get(group, {}).get(word.lower())
            if said is not None:
                raise click.UsageError(f"no such command {word!r}: {said}", ctx) from None
            meant = hints.command(group, word, names)
            if meant is None:  # click's own, its hint from every command (a lazy one too)
                raise click.exceptions.NoSuchCommand(word, possibilities=names, ctx=ctx) from None
            msg = f"no such command {word!r} (did you mean {meant}?)"
            raise click.UsageError(msg, ctx) from None

    def invoke(self, ctx: click.Context) -> Any:  # what the command returns
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Ctrl-C (e.g. ending `events -f`): the user asked for it, so print nothing.
            ctx.exit(EXIT_INTERRUPTED)


Callback = Callable[..., Any]
# An option decorator gives back the callback's own type, as click.option does.
F = TypeVar("F", bound=Callback)


def given(bench_dir: str | None, as_json: bool) -> tuple[str | None, bool]:
    """--dir and --json as a command sees them: its own, else those given before it."""
    top = click.get_current_context().find_root().params
    as_json = as_json or bool(top.get("as_json"))
    return (top.get("bench_dir") if bench_dir is None else bench_dir), as_json


def common(f: F) -> F:
    """--dir and --json on every command; given before it too, the one after wins."""

    @functools.wraps(f)  # click takes the command's name and help from f
    def merged(*args: Any, bench_dir: str | None = None, as_json: bool = False, **kw: Any) -> Any:
        bench_dir, as_json = given(bench_dir, as_json)
        return f(*args, bench_dir=bench_dir, as_json=as_json, **kw)

    cmd = click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(merged)
    return cast(F, click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)(cmd))


def _check_daemon_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None:
        problem = option_problem(param.opts[0], value)
        if problem:
            raise click.BadParameter(problem)
    return value


# What @daemon_options passes a command by field name: None if not given.
DaemonOption = int | float | str | bool | None


def daemon_options(f: F) -> F:
    for o in reversed(OPTIONS):
        f = click.option(
            o.flag,
            o.dest,
            type=o.type,
            default=None,
            callback=_check_daemon_option,
            help=f"{o.help} (env {o.env}; default {o.default})",
        )(f)
    f = click.option("--test-hooks", is_flag=True, hidden=True)(f)
    f = click.option(
        "--isolation",
        type=click.Choice(["auto", "required", "off"]),
        help="sandbox each session (bwrap): auto, required or off "
        "(env BENCH_ISOLATION; default auto)",
    )(f)
    f = click.option(
        "--node",
        help="this node's name for mail between nodes (env BENCH_NODE; default: the hostname)",
    )(f)
    return click.option(
        "--bridge",
        "bridge_url",
        metavar="URL",
        help="also run and supervise a bridge to this NATS URL",
    )(f)


def daemon_argv(bench_dir: str, kw: Mapping[str, DaemonOption]) -> list[str]:
    argv = [sys.executable, "-m", "benchd.server.app", "--dir", bench_dir]
    return argv + option_args(kw)


def option_args(kw: Mapping[str, DaemonOption]) -> list[str]:
    argv: list[str] = []
    for o in OPTIONS:
        v = kw.get(o.dest)
        if v is not None:
            argv += [o.flag, str(v)]
    if kw.get("test_hooks"):
        argv.append("--test-hooks")
    for flag, dest in (
        ("--node", "node"),
        ("--isolation", "isolation"),
        ("--bridge", "bridge_url"),
    ):
        if kw.get(dest):
            argv += [flag, str(kw[dest])]
    return argv


def connect(bench_dir: str | None, timeout: float | None = 30.0) -> Client:
    """A connection of the typed client, with the caller's BENCH_TOKEN."""
    return Client(bench_dir, timeout=timeout, codec=StructCodec(os.environ.get("BENCH_TOKEN")))


def ask(bench_dir: str | None, req: m.Request[R], timeout: float | None = 30.0) -> R:
    """One request on a connection of its own; its typed answer (or WireError)."""
    with connect(bench_dir, timeout) as conn:
        return conn.call(req)


def call(bench_dir: str | None, req: m.Request, timeout: float | None = 30.0) -> Json:
    """`ask`, the answer as plain data under its wire names, for code that adds to it."""
    plain: Json = msgspec.to_builtins(ask(bench_dir, req, timeout))
    return plain


def colour(as_json: bool) -> bool:
    """Colour only on a terminal, never with --json, never when NO_COLOR is set."""
    return not as_json and not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def examples(*lines: str) -> str:
    """A help epilog of example command lines (\\b keeps click from rewrapping them)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


# ---------------------------------------------------------------- completion


def _listed(ctx: click.Context) -> tuple[str | None, list[m.SessionInfo]]:
    """The command line's BENCH_DIR so far, and its daemon's sessions (a completion
    never fails: none when no daemon answers)."""
    bench_dir = ctx.params.get("bench_dir") or ctx.find_root().params.get("bench_dir")
    try:
        return bench_dir, ask(bench_dir, m.SessionList(), timeout=2.0).sessions
    except (WireError, OSError):
        return bench_dir, []


def _completions(names: set[str], incomplete: str) -> "list[CompletionItem]":
    from click.shell_completion import CompletionItem

    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def complete_handles(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> "list[CompletionItem]":
    """Live handles (and, for mail, the existing mailboxes), asked of the daemon."""
    bench_dir, listed = _listed(ctx)
    names = {s.handle for s in listed if s.state == "running"}
    if param.name in ("to", "handle", "reply_to"):
        try:
            names |= set(os.listdir(os.path.join(resolve_dir(bench_dir), "mail")))
        except (OSError, WireError):
            pass
    return _completions(names, incomplete)


def reply_to_option(help_: str) -> Callable[[Callback], Callback]:
    """`--reply-to H` (repeatable, handles completed), with its help for this command."""
    return click.option(
        "--reply-to",
        "reply_to",
        multiple=True,
        metavar="H",
        shell_complete=complete_handles,
        help=help_,
    )


def complete_sessions(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> "list[CompletionItem]":
    """Handles of live sessions, and the ids of every session the daemon remembers."""
    listed = _listed(ctx)[1]
    names = {s.handle for s in listed if s.state == "running"} | {s.session for s in listed}
    return _completions(names, incomplete)
