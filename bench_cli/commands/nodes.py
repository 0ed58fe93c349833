"""Mail between nodes: `bench bridge` (the NATS bridge, foreground) and `bench nodes`."""

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from bench_bridge.options import Options, Quotas
from bench_cli import output
from bench_cli.context import Group, call, common, examples
from bench_cli.output import done
from bench_wire import messages as m
from bench_wire.client import resolve_dir
from bench_wire.errors import WireError

if TYPE_CHECKING:
    from bench_bridge.urls import Connection


def connection(f: Callable[..., None]) -> Callable[..., None]:
    """The NATS connection's options, handed to the command as one `conn`
    (bench_bridge.urls.Connection: its fields are the options' names)."""

    @functools.wraps(f)
    def with_conn(*args: object, **kwargs: Any) -> None:
        from bench_bridge.urls import Connection  # stdlib only: no extra needed to parse

        conn = Connection(**{x.name: kwargs.pop(x.name) for x in dataclasses.fields(Connection)})
        f(*args, conn=conn, **kwargs)

    command: Callable[..., None] = with_conn
    for option in reversed(_CONNECTION):
        command = option(command)
    return command


_CONNECTION = [
    click.option(
        "--nats",
        "url",
        required=True,
        metavar="URL",
        envvar="BENCH_NATS_URL",
        help="the NATS server (nats://HOST:PORT, tls://HOST:PORT)",
    ),
    click.option(
        "--creds",
        type=click.Path(exists=True, dir_okay=False),
        envvar="BENCH_NATS_CREDS",
        help="NATS credentials file",
    ),
    click.option("--token", envvar="BENCH_NATS_TOKEN", help="NATS auth token"),
    click.option(
        "--tls-ca",
        type=click.Path(exists=True, dir_okay=False),
        envvar="BENCH_NATS_TLS_CA",
        help="CA bundle to verify the server (turns TLS on)",
    ),
    click.option(
        "--tls-cert",
        type=click.Path(exists=True, dir_okay=False),
        envvar="BENCH_NATS_TLS_CERT",
        help="client certificate for TLS",
    ),
    click.option(
        "--tls-key",
        type=click.Path(exists=True, dir_okay=False),
        envvar="BENCH_NATS_TLS_KEY",
        help="client key for TLS",
    ),
    click.option(
        "--insecure", is_flag=True, help="allow a nats:// URL to another host without TLS"
    ),
]


def numbers(kind: type) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A flag for each field of `kind` that has help (bench_bridge.options declares
    them), passed to the command by the field's name (`--ack-wait`: ack_wait)."""

    def decorate(f: Callable[..., None]) -> Callable[..., None]:
        for x in reversed(dataclasses.fields(kind)):
            if "help" in x.metadata:
                flag = "--" + x.name.replace("_", "-")
                default = x.default
                option = click.option(
                    flag,
                    type=type(default),
                    default=default,
                    show_default=True,
                    help=x.metadata["help"],
                )
                f = option(f)
        return f

    return decorate


def _positive(values: dict[str, Any]) -> None:
    """Every number above 0, else a usage error naming the first flag that is not."""
    for name, value in values.items():
        if value <= 0:
            raise click.BadParameter("must be positive", param_hint="--" + name.replace("_", "-"))


@click.command()
@common
@connection
@click.option("--node", help="must match the daemon's node name (a safety check)")
@numbers(Options)
def bridge(
    bench_dir: str | None,
    as_json: bool,
    node: str | None,
    conn: "Connection",
    **limits: Any,  # click's values of Options' flags, each of its field's type
) -> None:
    """Carry mail between this node and others over NATS JetStream (foreground)."""
    try:
        from bench_bridge.bridge import main as bridge_main
    except ImportError as err:
        raise WireError(
            "bad-request", f"the bridge needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    _positive(limits)
    sys.exit(bridge_main(Options(resolve_dir(bench_dir), conn, node=node, **limits)))


bridge.epilog = examples(
    "bench bridge --nats nats://127.0.0.1:4222",
    "bench bridge --nats tls://nats.example:4222 --tls-ca ca.pem",
    "bench bridge --nats tls://node2:PASSWORD-2@nats.example:4222 --tls-ca ca.pem",
)


@click.group(cls=Group, invoke_without_command=True)
@common
def nodes(bench_dir: str | None, as_json: bool) -> None:
    """The nodes this node's bridge has seen: last heartbeat and live handles."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    a = call(bench_dir, m.NodesRead())
    now = time.time() * 1000
    for n in a["nodes"]:
        # An age, as idle_ms is; seen_ms stays the time of the last heartbeat.
        n["age_ms"] = max(0, int(now - n["seen_ms"]))
    lines = [f"this node: {a['node']}, {output.bridge_line(a['bridge'])}"]
    if not a["nodes"]:
        lines.append("no other nodes seen yet")
    for n in a["nodes"]:
        ago = output.duration((now - n["seen_ms"]) / 1000)
        lines.append(f"{n['node']:<24} seen {ago:>4} ago  {' '.join(n['handles']) or '-'}")
    done(as_json, a, "\n".join(lines))


nodes.epilog = examples("bench nodes", "bench nodes --json")


@nodes.command("init")
@common
@connection
@numbers(Quotas)
def nodes_init(
    bench_dir: str | None,
    as_json: bool,
    conn: "Connection",
    **quotas: Any,  # click's values of Quotas' flags, each of its field's type
) -> None:
    """Create (or restore) the mail stream and the node directory in NATS, with quotas:
    the administrator's step, run with the administrator's NATS user."""
    try:
        from bench_bridge import streams
    except ImportError as err:
        raise WireError(
            "bad-request", f"this needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    _positive(quotas)
    lines = streams.run(conn, Quotas(**quotas))
    done(as_json, {"done": lines}, "\n".join(lines))


nodes_init.epilog = examples(
    "bench nodes init --nats nats://admin:ADMIN-PASSWORD@127.0.0.1:4222",
    "bench nodes init --nats tls://admin:ADMIN-PASSWORD@nats.example:4222 --tls-ca ca.pem",
    "bench nodes init --nats tls://nats.example:4222 --creds admin.creds --max-bytes 10000000000",
)
