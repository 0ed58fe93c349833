"""The mail stream and the directory bucket: their one configuration, made by `bench
nodes init` (`run`) and checked by every bridge (docs/nodes.md, "The administrator's step").
"""

import asyncio
import ssl

import nats
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

from bench_bridge import natsside, urls
from bench_bridge.options import ENTRY_MAX, Quotas
from bench_wire.errors import WireError

DUPLICATE_WINDOW_S = 120.0  # JetStream's deduplication by Nats-Msg-Id
CHECK_EVERY_S = 60.0  # a running bridge checks the configuration again this often


def mail_config(q: Quotas) -> api.StreamConfig:
    # Discard NEW: a full stream refuses the publish (the sender keeps the mail queued
    # and retries), it never drops waiting mail to make room.
    return api.StreamConfig(
        name=urls.STREAM,
        subjects=[f"{urls.SUBJECT_ROOT}.>"],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_bytes=q.max_bytes,
        max_msg_size=q.max_msg_size,
        max_age=q.max_age,
        deny_delete=True,
        deny_purge=True,
        allow_rollup_hdrs=False,
    )


def directory_config(q: Quotas) -> api.StreamConfig:
    """The bucket as nats-py's KeyValue reads it (one value per key, direct gets), but
    with no rollup headers, no purge and no delete: a node can replace only its own entry."""
    return api.StreamConfig(
        name=urls.KV_STREAM,
        subjects=[f"$KV.{urls.DIRECTORY}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=min(DUPLICATE_WINDOW_S, q.forget_after),
        max_msgs_per_subject=1,
        max_bytes=q.directory_max_bytes,
        max_msg_size=ENTRY_MAX,
        max_age=q.forget_after,
        allow_direct=True,
        deny_delete=True,
        deny_purge=True,
        allow_rollup_hdrs=False,
    )


def problems(cfg: api.StreamConfig, want: api.StreamConfig, max_age_floor: float) -> list[str]:
    """How `cfg` (as found) differs from what a bridge may trust; [] when it may."""
    out = []
    if list(cfg.subjects or []) != list(want.subjects or []):
        out.append(f"subjects {cfg.subjects} (expected {want.subjects})")
    if cfg.republish:
        out.append("it republishes its messages elsewhere")
    if cfg.mirror:
        out.append("it is a mirror")
    if cfg.sources:
        out.append("it has sources")
    if cfg.subject_transform:
        out.append("it transforms subjects")
    if cfg.retention != want.retention:
        out.append(f"retention {cfg.retention} (expected {want.retention})")
    if cfg.allow_rollup_hdrs:
        out.append("it allows rollup headers")
    if not cfg.deny_purge or not cfg.deny_delete:
        out.append("it allows purge or delete")
    if cfg.duplicate_window != want.duplicate_window:
        out.append(f"a dedup window of {cfg.duplicate_window} s (expected {want.duplicate_window})")
    if (cfg.max_msgs_per_subject or -1) != (want.max_msgs_per_subject or -1):
        out.append(f"max_msgs_per_subject {cfg.max_msgs_per_subject}")
    if not (cfg.max_bytes or 0) > 0 or not (cfg.max_msg_size or 0) > 0 or not cfg.max_age:
        out.append("no quotas (max_bytes, max_msg_size and max_age must be set)")
    elif cfg.max_age < max_age_floor:
        out.append(f"max_age {cfg.max_age:g} s, shorter than the {max_age_floor:g} s expected")
    if cfg.discard != api.DiscardPolicy.NEW:
        out.append("discard old (a full stream would drop waiting messages)")
    return out


async def check(js: JetStreamContext, max_age: float, q: Quotas) -> None:
    """Raise stream-misconfigured, or stream-missing for one not there that this user
    may not make (with the quotas `q`). The mail stream must outlive the bridge's own
    expiry, so expired mail is bounced before JetStream drops it."""
    await _check_one(js, mail_config(q), max_age)
    await _check_one(js, directory_config(q), 0.0)


async def _check_one(js: JetStreamContext, want: api.StreamConfig, floor: float) -> None:
    assert want.name is not None  # both configurations are named
    try:
        info = await js.stream_info(want.name)
    except NotFoundError:
        try:
            await js.add_stream(config=want)
            return
        except (NatsTimeout, TimeoutError, NatsError) as err:
            try:  # another bridge made it meanwhile?
                info = await js.stream_info(want.name)
            except NotFoundError:
                # Without the right (the documented node users), the request gets no
                # answer at all.
                raise WireError(
                    "stream-missing",
                    f"the NATS stream {want.name} is not there: it does not exist and could "
                    f"not be made ({err}); have the administrator run "
                    "`bench nodes init --nats URL` with the administrator's user",
                ) from None
    bad = problems(info.config, want, floor)
    if bad:
        raise WireError(
            "stream-misconfigured",
            f"the NATS stream {want.name} is not configured as bench expects ({'; '.join(bad)}): "
            "refusing to use it, as it could hand mail to someone else or lose it; "
            "have the administrator run `bench nodes init`",
        )


async def init(js: JetStreamContext, q: Quotas) -> list[str]:
    """Create or update the stream and the bucket: what was done, one line each."""
    done = []
    for want in (mail_config(q), directory_config(q)):
        assert want.name is not None
        try:
            found = await js.stream_info(want.name)
        except NotFoundError:
            await js.add_stream(config=want)
            done.append(f"created {want.name}")
            continue
        # Per-message TTLs cannot be turned off once on (nats-py's own buckets have
        # them): kept as found; a node can set one only on what it may publish anyway.
        want.allow_msg_ttl = found.config.allow_msg_ttl
        await js.update_stream(config=want)
        done.append(f"updated {want.name}")
    return done


async def _connect_init(conn: urls.Connection, q: Quotas, tls: ssl.SSLContext | None) -> list[str]:
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
        return await init(js, q)
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


def run(conn: urls.Connection, q: Quotas) -> list[str]:
    """Create or update both streams; what was done, one line each (or WireError)."""
    conn.check()
    return asyncio.run(_connect_init(conn, q, conn.tls()))
