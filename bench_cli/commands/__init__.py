"""The click commands of `bench`, one module per area, each imported only when one of its
commands is asked for (the table is `COMMANDS` in bench_cli.cli).

Also bench_cli.context's two option decorators as the type checker should see them:
context leaves them unannotated, and an unannotated decorator makes the command it
decorates untyped. Each hands back the function it was given with click's options
attached, as click's own `click.option` does.
"""

from collections.abc import Callable
from typing import Protocol, TypeVar

from bench_cli import context

_F = TypeVar("_F", bound=Callable[..., object])


class OptionDecorator(Protocol):
    def __call__(self, f: _F, /) -> _F: ...


common: OptionDecorator = context.common  # --dir and --json
daemon_options: OptionDecorator = context.daemon_options  # the daemon's options
