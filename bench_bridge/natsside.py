"""The bridge's NATS-side helpers: making sure the stream and the directory bucket
exist, the names and ids it publishes under, and reading errors. No daemon I/O here."""

import hashlib
import os
import secrets
import time

from nats.errors import Error as NatsError
from nats.js import api
from nats.js.errors import NotFoundError

from bench_bridge import urls
from bench_wire import messages as m

INSTANCE_FILE = "bridge.id"  # in BENCH_DIR: this node's bridge instance, across restarts


async def ensure_stream(js) -> None:
    try:
        await js.stream_info(urls.STREAM)
        return
    except NotFoundError:
        pass
    try:
        await js.add_stream(
            name=urls.STREAM,
            subjects=[f"{urls.SUBJECT_ROOT}.>"],
            retention=api.RetentionPolicy.WORK_QUEUE,
            storage=api.StorageType.FILE,
            duplicate_window=120.0,
        )
    except NatsError as err:
        if "already in use" not in str(err):
            raise


async def ensure_directory(js, forget_s: float):
    try:
        return await js.key_value(urls.DIRECTORY)
    except (NotFoundError, NatsError):
        pass
    # The bucket's TTL purges the entries of nodes gone quiet, so the directory does not
    # grow with every name ever used (the readers also leave such nodes out).
    return await js.create_key_value(bucket=urls.DIRECTORY, history=1, ttl=forget_s)


def instance(bench_dir: str) -> str:
    """This node's bridge instance id, kept in BENCH_DIR: a restarted bridge is the same
    instance, a bridge of another BENCH_DIR using the same node name is not."""
    path = os.path.join(bench_dir, INSTANCE_FILE)
    try:
        with open(path) as f:
            found = f.read().strip()
        if found:
            return found
    except OSError:
        pass
    made = secrets.token_hex(8)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(made + "\n")
    os.replace(tmp, path)
    return made


def digest(x: m.RemoteMail) -> str:
    """What makes a stream id unguessable: without the message's own id and body, nobody
    can publish first under its id to have the real one dropped as a duplicate."""
    h = hashlib.sha256(x.mail_id.encode())
    h.update(x.body.encode())
    return h.hexdigest()[:32]


def age_s(msg) -> float:
    """How long the message has been in the stream (its stored time)."""
    try:
        stamp = msg.metadata.timestamp.timestamp()
    except (AttributeError, ValueError, NatsError):
        return 0.0  # not a JetStream delivery: no age to judge
    return max(0.0, time.time() - stamp)


async def quiet(*_args) -> None:
    """nats-py callbacks: connection trouble is reported by the loops as bridge/retry."""


def describe(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def is_auth_error(err: BaseException) -> bool:
    text = str(err).lower()
    return "authorization" in text or "authentication" in text
