"""The bridge's NATS-side helpers: listing the directory, the ids it publishes under,
reading errors, and the back-off between attempts. No daemon I/O here."""

import hashlib
import os
import random
import secrets
import time

from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from bench_bridge import streams, urls
from bench_wire import messages as m

INSTANCE_FILE = "bridge.id"  # in BENCH_DIR: this node's bridge instance, across restarts


class Backoff:
    """The wait before the next attempt: doubling from 0.1 s up to `most`, jittered."""

    def __init__(self, most: float):
        self.attempt = 0
        self.most = most

    def next(self) -> float:
        self.attempt += 1
        return min(self.most, 0.1 * 2.0 ** min(self.attempt - 1, 10)) * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.attempt = 0


async def directory_keys(js: JetStreamContext) -> list[str]:
    """The directory's keys, from its stream's subjects: one request that leaves no
    consumer behind (nats-py's kv.keys() makes a watcher the server keeps for minutes,
    one per read: hundreds per bridge)."""
    prefix = f"$KV.{urls.DIRECTORY}."
    try:
        info = await js.stream_info(streams.KV_STREAM, subjects_filter=f"{prefix}>")
    except NotFoundError:
        return []
    subjects = info.state.subjects or {}
    return [s[len(prefix) :] for s in subjects if s.startswith(prefix)]


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


def msg_id(origin: str, x: m.RemoteMail) -> str:
    """The message's JetStream dedup id: the origin and the 128 random bits drawn when
    it was queued (kept in its queue file, so a republish after a crash has the same
    id). Nobody else can know it before it is published, so nobody can publish first
    under it to have the real message dropped as a duplicate."""
    if x.nonce:
        return f"{origin} {x.nonce}"
    # Queued by a daemon before nonces: the old id (guessable by whoever knows the
    # message's id and body).
    return urls.msg_id(origin, x.sender, x.key, digest(x))


def digest(x: m.RemoteMail) -> str:
    """The old ids' digest of the message's own id and body."""
    h = hashlib.sha256(x.mail_id.encode())
    h.update(x.body.encode())
    return h.hexdigest()[:32]


def age_s(msg: Msg) -> float:
    """How long the message has been in the stream (its stored time)."""
    try:
        stamp = msg.metadata.timestamp.timestamp()
    except (AttributeError, ValueError, NatsError):
        return 0.0  # not a JetStream delivery: no age to judge
    return max(0.0, time.time() - stamp)


def describe(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def is_auth_error(err: BaseException) -> bool:
    text = str(err).lower()
    return "authorization" in text or "authentication" in text
