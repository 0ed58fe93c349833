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


async def _init(
    url: str, q: streams.Quotas, creds: str | None, token: str | None, tls: ssl.SSLContext | None
) -> list[str]:
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
    }
    if creds:
        opts["user_credentials"] = creds
    if token:
        opts["token"] = token
    if tls is not None:
        opts["tls"] = tls
    try:
        nc = await nats.connect([url], **opts)
    except (TimeoutError, OSError, NatsError) as err:
        why = natsside.describe(refused[0] if refused else err)
        raise WireError(
            "nats-unreachable", f"could not connect to {urls.shown(url)}: {why}"
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


def run(
    url: str,
    q: streams.Quotas,
    creds: str | None = None,
    token: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure: bool = False,
) -> list[str]:
    """Create or update both streams; what was done, one line each (or WireError)."""
    urls.check_url(url, bool(tls_ca or tls_cert), insecure)
    tls = urls.tls_context(tls_ca, tls_cert, tls_key)
    return asyncio.run(_init(url, q, creds, token, tls))
