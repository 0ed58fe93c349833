"""`bench nodes init`: the administrator's step that makes (or brings back to the
documented configuration) the mail stream and the directory bucket, with quotas. Run
with the administrator's NATS user: the nodes' users may not create, update or delete
either (docs/nodes.md), so no node can shape the stream to read the others' mail."""

import asyncio
import ssl

import nats
from nats.errors import Error as NatsError

from bench_bridge import natsside, streams, urls
from bench_wire.errors import WireError


async def _init(conn: urls.Connection, q: streams.Quotas, tls: ssl.SSLContext | None) -> list[str]:
    refused: list[BaseException] = []

    async def on_error(err: BaseException) -> None:
        # nats-py's default prints a traceback; an auth failure is said below.
        if natsside.is_auth_error(err):
            refused.append(err)

    # nats.connect takes the servers typed and the rest as untyped keywords.
    opts: dict[str, object] = {
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,
        "connect_timeout": 5,
        "name": "bench-nodes-init",
        "error_cb": on_error,
        **conn.auth(tls),
    }
    try:
        nc = await nats.connect([conn.url], **opts)
    except (TimeoutError, OSError, NatsError) as err:
        why = natsside.describe(refused[0] if refused else err)
        raise WireError(
            "nats-unreachable", f"could not connect to {urls.shown(conn.url)}: {why}"
        ) from None
    try:
        js = nc.jetstream(timeout=10)
        return await streams.init(js, q)
    except (TimeoutError, NatsError) as err:
        # A user without the right gets no answer at all (a permissions violation).
        who = (
            ": this needs the administrator's user (a node's user may not create or change them)"
            if isinstance(err, TimeoutError) or "timeout" in type(err).__name__.lower()
            else ""
        )
        raise WireError(
            "nats-refused", f"NATS refused to set up the streams ({natsside.describe(err)}){who}"
        ) from None
    finally:
        await nc.close()


def run(conn: urls.Connection, q: streams.Quotas) -> list[str]:
    """Create or update both streams; what was done, one line each (or WireError)."""
    conn.check()
    return asyncio.run(_init(conn, q, conn.tls()))
