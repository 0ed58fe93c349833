"""Mail between nodes: `bench bridge` (the NATS bridge, foreground) and `bench nodes`."""

import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from bench_cli import humanize, output
from bench_cli.context import Ctx, call, common, done, examples
from bench_cli.group import Group
from bench_wire import messages as m
from bench_wire.client import resolve_dir
from bench_wire.errors import WireError

if TYPE_CHECKING:
    from bench_bridge.urls import Connection


def connection(f: Callable[..., None]) -> Callable[..., None]:
    """The NATS connection's options, the same for `bench bridge` and `bench nodes init`,
    handed to the command as one `conn` (bench_bridge.urls.Connection)."""

    @functools.wraps(f)
    def with_conn(
        *args: object,
        url: str,
        creds: str | None,
        token: str | None,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        insecure: bool,
        **kwargs: object,
    ) -> None:
        from bench_bridge.urls import Connection  # stdlib only: no extra needed to parse

        conn = Connection(url, creds, token, tls_ca, tls_cert, tls_key, insecure)
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


@click.command()
@common
@connection
@click.option("--node", help="must match the daemon's node name (a safety check)")
@click.option(
    "--heartbeat",
    type=float,
    default=5.0,
    show_default=True,
    help="seconds between directory heartbeats",
)
@click.option(
    "--ack-wait",
    type=float,
    default=30.0,
    show_default=True,
    help="seconds before JetStream redelivers a message this bridge did not ack",
)
@click.option(
    "--forget-after",
    type=float,
    default=7 * 86400.0,
    show_default=True,
    help="seconds after which a node not seen is forgotten (mail to it: unknown-node)",
)
@click.option(
    "--max-age",
    type=float,
    default=7 * 86400.0,
    show_default=True,
    help="seconds mail may wait in NATS for this node before it is returned to its sender",
)
@click.option(
    "--entry-max", type=int, default=16384, show_default=True, help="bytes of one directory entry"
)
@click.option(
    "--handles-max", type=int, default=512, show_default=True, help="handles in one directory entry"
)
@click.option(
    "--nodes-max", type=int, default=256, show_default=True, help="nodes kept from the directory"
)
@click.option(
    "--publish-window",
    type=int,
    default=1024,
    show_default=True,
    help="messages published to NATS and awaiting their PubAck, at most",
)
@click.option(
    "--reply-to-max",
    type=int,
    default=16,
    show_default=True,
    help="reply-to addresses in one message from another node (more: bounced)",
)
@click.option(
    "--new-mailboxes-per-hour",
    type=int,
    default=120,
    show_default=True,
    help="new mailboxes one other node may make here per hour (more: bounced)",
)
@click.option(
    "--receipts-per-minute",
    type=int,
    default=6000,
    show_default=True,
    help="receipts one other node may send here per minute (more: dropped)",
)
def bridge(
    bench_dir: str | None,
    as_json: bool,
    heartbeat: float,
    ack_wait: float,
    forget_after: float,
    max_age: float,
    entry_max: int,
    handles_max: int,
    nodes_max: int,
    publish_window: int,
    reply_to_max: int,
    new_mailboxes_per_hour: int,
    receipts_per_minute: int,
    node: str | None,
    conn: "Connection",
) -> None:
    """Carry mail between this node and others over NATS JetStream (foreground)."""
    try:
        from bench_bridge.bridge import main as bridge_main
        from bench_bridge.options import Options
    except ImportError as err:
        raise WireError(
            "bad-request", f"the bridge needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    if (
        min(heartbeat, ack_wait, forget_after, max_age, entry_max, handles_max, nodes_max) <= 0
        or min(publish_window, reply_to_max, new_mailboxes_per_hour, receipts_per_minute) <= 0
    ):
        raise click.BadParameter("must be positive", param_hint="/".join(_BRIDGE_FLAGS))
    opts = Options(
        resolve_dir(bench_dir),
        conn,
        node=node,
        heartbeat=heartbeat,
        ack_wait=ack_wait,
        forget_after=forget_after,
        max_age=max_age,
        entry_max=entry_max,
        handles_max=handles_max,
        nodes_max=nodes_max,
        publish_window=publish_window,
        reply_to_max=reply_to_max,
        new_mailboxes_per_hour=new_mailboxes_per_hour,
        receipts_per_minute=receipts_per_minute,
    )
    sys.exit(bridge_main(opts))


_BRIDGE_LIMITS = (
    "forget_after",
    "max_age",
    "entry_max",
    "handles_max",
    "nodes_max",
    "publish_window",
    "reply_to_max",
    "new_mailboxes_per_hour",
    "receipts_per_minute",
)
_BRIDGE_FLAGS = ("--heartbeat", "--ack-wait", *(f"--{k.replace('_', '-')}" for k in _BRIDGE_LIMITS))


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
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.NodesRead())
    now = time.time() * 1000
    for n in a["nodes"]:
        # An age, as idle_ms is; seen_ms stays the time of the last heartbeat.
        n["age_ms"] = max(0, int(now - n["seen_ms"]))
    lines = [f"this node: {a['node']}, {output.bridge_line(a['bridge'])}"]
    if not a["nodes"]:
        lines.append("no other nodes seen yet")
    for n in a["nodes"]:
        ago = humanize.duration((now - n["seen_ms"]) / 1000)
        lines.append(f"{n['node']:<24} seen {ago:>4} ago  {' '.join(n['handles']) or '-'}")
    done(ctx, a, "\n".join(lines))


nodes.epilog = examples("bench nodes", "bench nodes --json")


@nodes.command("init")
@common
@connection
@click.option(
    "--max-bytes",
    type=int,
    default=1024**3,
    show_default=True,
    help="the mail stream's quota: bytes of mail waiting in NATS, all nodes together",
)
@click.option(
    "--max-msg-size",
    type=int,
    default=1024 * 1024,
    show_default=True,
    help="bytes of one message in the mail stream",
)
@click.option(
    "--max-age",
    type=float,
    default=14 * 86400.0,
    show_default=True,
    help="seconds NATS keeps a message no node took (at least the bridges' --max-age)",
)
@click.option(
    "--forget-after",
    type=float,
    default=7 * 86400.0,
    show_default=True,
    help="seconds a directory entry is kept without a heartbeat",
)
@click.option(
    "--directory-max-bytes",
    type=int,
    default=64 * 1024 * 1024,
    show_default=True,
    help="the directory bucket's quota in bytes",
)
def nodes_init(
    bench_dir: str | None,
    as_json: bool,
    max_bytes: int,
    max_msg_size: int,
    max_age: float,
    forget_after: float,
    directory_max_bytes: int,
    conn: "Connection",
) -> None:
    """Create (or restore) the mail stream and the node directory in NATS, with quotas:
    the administrator's step, run with the administrator's NATS user."""
    try:
        from bench_bridge import admin, streams
    except ImportError as err:
        raise WireError(
            "bad-request", f"this needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    if min(max_bytes, max_msg_size, max_age, forget_after, directory_max_bytes) <= 0:
        raise click.BadParameter("must be positive", param_hint="the quotas")
    q = streams.Quotas(
        max_bytes=max_bytes,
        max_msg_size=max_msg_size,
        max_age=max_age,
        forget_after=forget_after,
        directory_max_bytes=directory_max_bytes,
    )
    lines = admin.run(conn, q)
    done(Ctx(bench_dir, as_json), {"done": lines}, "\n".join(lines))


nodes_init.epilog = examples(
    "bench nodes init --nats nats://admin:ADMIN-PASSWORD@127.0.0.1:4222",
    "bench nodes init --nats tls://admin:ADMIN-PASSWORD@nats.example:4222 --tls-ca ca.pem",
    "bench nodes init --nats tls://nats.example:4222 --creds admin.creds --max-bytes 10000000000",
)
