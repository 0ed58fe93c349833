"""The bridge's NATS side, with no daemon I/O: this node's durable consumer, listing the
directory, the ids it publishes under, reading errors, and the back-off between attempts.
"""

import asyncio
import hashlib
import json
import os
import random
import secrets
import time
from collections import deque

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

from bench_bridge import urls
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
    consumer behind (nats-py's kv.keys() makes a watcher the server keeps for minutes)."""
    prefix = f"$KV.{urls.DIRECTORY}."
    try:
        info = await js.stream_info(urls.KV_STREAM, subjects_filter=f"{prefix}>")
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
    """The message's JetStream dedup id: the origin and the random nonce drawn when it
    was queued, which nobody can claim first; mail queued before nonces keeps its old
    id (guessable by whoever knows the message's id and body)."""
    if x.nonce:
        return f"{origin} {x.nonce}"
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


# ---------------------------------------------------------------- the consumer

BATCH = 128  # messages per pull request (at most 1.5x this are on their way to us)
EXPIRES_S = 30.0  # a pull request's life on the server
HEARTBEAT_S = 1.0  # the server's idle heartbeat on an open request
RETRY_S = 0.1  # after the server gave a request up, the wait before the next


class ConsumerTrouble(NatsError):
    """The server refused our pull requests (e.g. the consumer was deleted)."""


class Consumer:
    """This node's durable consumer, read with pull requests kept open: the server pushes
    each message the moment it is stored. Another request goes before one runs out, so
    a burst never waits a round trip; three idle heartbeats unheard mean the request is
    gone (a server restart). Nothing here acks: the caller acks after its daemon's answer."""

    def __init__(self, nc: NatsClient, js: JetStreamContext, node: str, ack_wait: float):
        self.nc, self.js = nc, js
        self.durable = urls.consumer(node)
        # What the consumer is made with the first time (the server keeps it from then on).
        self.config = api.ConsumerConfig(
            name=self.durable,
            durable_name=self.durable,
            filter_subject=f"{urls.SUBJECT_ROOT}.{urls.token(node)}.>",
            ack_wait=ack_wait,
            max_ack_pending=4096,
        )
        self.inbox = nc.new_inbox()
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{urls.STREAM}.{self.durable}"
        self.sub: Subscription | None = None
        self.ready: deque[Msg] = deque()  # delivered to us, not yet taken
        self.arrived = asyncio.Event()
        self.owed = 0  # messages the open requests may still bring
        self.heard = time.monotonic()  # last message or heartbeat
        self.conflict_at = 0.0  # when the server last gave a request up
        self.trouble: str | None = None

    async def open(self) -> "Consumer":
        """Make sure the durable consumer exists and start listening."""
        try:
            await self.js.consumer_info(urls.STREAM, self.durable)
        except NotFoundError:
            await self.js.add_consumer(urls.STREAM, config=self.config)
        self.sub = await self.nc.subscribe(self.inbox, cb=self._on_msg)
        self.owed, self.heard, self.trouble = 0, time.monotonic(), None
        return self

    async def close(self) -> None:
        if self.sub is not None:
            sub, self.sub = self.sub, None
            try:
                await sub.unsubscribe()
            except NatsError:
                pass  # the connection is gone: so is the subscription

    async def take(self, most: int) -> list[Msg]:
        """Wait for the next message, then return it with whatever else is ready (at
        most `most`). Raises ConsumerTrouble when the server refuses to serve us."""
        while not self.ready:
            if self.trouble is not None:
                raise ConsumerTrouble(self.trouble)
            now = time.monotonic()
            if now - self.heard > 3 * HEARTBEAT_S:
                self.owed = 0  # our requests are gone: ask anew
                self.heard = now
            if self.owed <= 0 and now - self.conflict_at < RETRY_S:
                # The server just gave a request up (a 409): do not spin asking.
                await asyncio.sleep(RETRY_S)
            self.arrived.clear()
            await self._top_up()
            if self.ready:
                break
            try:
                await asyncio.wait_for(self.arrived.wait(), HEARTBEAT_S)
            except TimeoutError:
                pass
        out: list[Msg] = []
        while self.ready and len(out) < most:
            out.append(self.ready.popleft())
        await self._top_up()
        return out

    async def _top_up(self) -> None:
        if self.owed > BATCH // 2:
            return
        req = {
            "batch": BATCH,
            "expires": int(EXPIRES_S * 1e9),
            "idle_heartbeat": int(HEARTBEAT_S * 1e9),
        }
        await self.nc.publish(self.next_subject, json.dumps(req).encode(), reply=self.inbox)
        self.owed += BATCH

    async def _on_msg(self, msg: Msg) -> None:
        self.heard = time.monotonic()
        headers = msg.headers or {}
        status = headers.get(api.Header.STATUS)
        if not status:
            self.owed = max(0, self.owed - 1)
            self.ready.append(msg)
            self.arrived.set()
            return
        if status == api.StatusCode.CONTROL_MESSAGE:
            return  # an idle heartbeat: our request is alive
        if status in (api.StatusCode.REQUEST_TIMEOUT, api.StatusCode.CONFLICT):
            # A request ended (expired, or the server gave it up); it says how many of
            # its messages it did not bring.
            left = headers.get("Nats-Pending-Messages")
            self.owed = max(0, self.owed - int(left)) if left and left.isdigit() else 0
            if status == api.StatusCode.CONFLICT:
                self.conflict_at = self.heard
            description = headers.get(api.Header.DESCRIPTION, "")
            if "deleted" in description.lower():
                self.trouble = f"the consumer {self.durable} was deleted"
        elif status == api.StatusCode.NO_MESSAGES:
            self.owed = 0
        else:  # 503: no responders (no consumer, no JetStream)
            self.trouble = f"pull request refused: {status} {headers.get('Description', '')}"
        self.arrived.set()
