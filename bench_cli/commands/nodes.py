"""Mail between nodes: `bench bridge` (the NATS bridge, foreground) and `bench nodes`."""

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

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


# flag, type, default, help. The defaults are bench_bridge's own, said again: the help
# shows them without importing the bridge (its extra may be missing).
Number = tuple[str, type[int] | type[float], float, str]

_BRIDGE_LIMITS: list[Number] = [
    ("--heartbeat", float, 5.0, "seconds between directory heartbeats"),
    (
        "--ack-wait",
        float,
        30.0,
        "seconds before JetStream redelivers a message this bridge did not ack",
    ),
    (
        "--forget-after",
        float,
        7 * 86400.0,
        "seconds after which a node not seen is forgotten (mail to it: unknown-node)",
    ),
    (
        "--max-age",
        float,
        7 * 86400.0,
        "seconds mail may wait in NATS for this node before it is returned to its sender",
    ),
    ("--entry-max", int, 16384, "bytes of one directory entry"),
    ("--handles-max", int, 512, "handles in one directory entry"),
    ("--nodes-max", int, 256, "nodes kept from the directory"),
    (
        "--publish-window",
        int,
        1024,
        "messages published to NATS and awaiting their PubAck, at most",
    ),
    (
        "--reply-to-max",
        int,
        16,
        "reply-to addresses in one message from another node (more: bounced)",
    ),
    (
        "--new-mailboxes-per-hour",
        int,
        120,
        "new mailboxes one other node may make here per hour (more: bounced)",
    ),
    (
        "--receipts-per-minute",
        int,
        6000,
        "receipts one other node may send here per minute (more: dropped)",
    ),
]

_QUOTAS: list[Number] = [
    (
        "--max-bytes",
        int,
        1024**3,
        "the mail stream's quota: bytes of mail waiting in NATS, all nodes together",
    ),
    ("--max-msg-size", int, 1024 * 1024, "bytes of one message in the mail stream"),
    (
        "--max-age",
        float,
        14 * 86400.0,
        "seconds NATS keeps a message no node took (at least the bridges' --max-age)",
    ),
    ("--forget-after", float, 7 * 86400.0, "seconds a directory entry is kept without a heartbeat"),
    ("--directory-max-bytes", int, 64 * 1024 * 1024, "the directory bucket's quota in bytes"),
]


def numbers(table: list[Number]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The table's options, each passed to the command by its name (`--ack-wait`: ack_wait)."""

    def decorate(f: Callable[..., None]) -> Callable[..., None]:
        for flag, kind, default, help_ in reversed(table):
            kw: dict[str, Any] = {"type": kind, "default": kind(default), "help": help_}
            f = click.option(flag, show_default=True, **kw)(f)
        return f

    return decorate


def _positive(values: dict[str, Any], hint: str) -> None:
    """Every number above 0, else a usage error naming `hint`."""
    if min(values.values()) <= 0:
        raise click.BadParameter("must be positive", param_hint=hint)


@click.command()
@common
@connection
@click.option("--node", help="must match the daemon's node name (a safety check)")
@numbers(_BRIDGE_LIMITS)
def bridge(
    bench_dir: str | None,
    as_json: bool,
    node: str | None,
    conn: "Connection",
    **limits: Any,  # click's values of _BRIDGE_LIMITS, each of its option's type
) -> None:
    """Carry mail between this node and others over NATS JetStream (foreground)."""
    try:
        from bench_bridge.bridge import main as bridge_main
        from bench_bridge.local import Options
    except ImportError as err:
        raise WireError(
            "bad-request", f"the bridge needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    _positive(limits, "/".join(flag for flag, *_ in _BRIDGE_LIMITS))
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
@numbers(_QUOTAS)
def nodes_init(
    bench_dir: str | None,
    as_json: bool,
    conn: "Connection",
    **quotas: Any,  # click's values of _QUOTAS, each of its option's type
) -> None:
    """Create (or restore) the mail stream and the node directory in NATS, with quotas:
    the administrator's step, run with the administrator's NATS user."""
    try:
        from bench_bridge import streams
    except ImportError as err:
        raise WireError(
            "bad-request", f"this needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    _positive(quotas, "the quotas")
    lines = streams.run(conn, streams.Quotas(**quotas))
    done(as_json, {"done": lines}, "\n".join(lines))


nodes_init.epilog = examples(
    "bench nodes init --nats nats://admin:ADMIN-PASSWORD@127.0.0.1:4222",
    "bench nodes init --nats tls://admin:ADMIN-PASSWORD@nats.example:4222 --tls-ca ca.pem",
    "bench nodes init --nats tls://nats.example:4222 --creds admin.creds --max-bytes 10000000000",
)
