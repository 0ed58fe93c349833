"""The bridge: a client of its local daemon (Unix socket, bench_wire) and of NATS JetStream.

Three loops, each on its own daemon connection:

- forward: pull the outbound queue, publish each message to JetStream with
  `Nats-Msg-Id` (so a republish after a crash is dropped by the stream), and only after
  every PubAck tell the daemon `bridge/forwarded`. Failures back off and are logged as
  bridge/retry.
- inbound: take what this node's durable consumer pushed to its open pull requests
  (bench_bridge.consumer), hand it to `bridge/deliver` (the daemon delivers with the
  sender's key, so a redelivery writes nothing), and ack each one only after the
  daemon's answer.
- heartbeat: put this node's entry (time, live handles) into the KV directory, read
  the others', and report them (and whether NATS is connected) to the daemon.

At-least-once on both hops plus key-idempotent delivery: every message lands once.
"""

import asyncio
import json
import os
import random
import sys
import time

import msgspec
import nats
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from bench_bridge import urls
from bench_bridge.consumer import Consumer
from bench_bridge.local import Local
from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.errors import WireError

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(m.RemoteMail)
DELIVER_MOST = 256  # messages per bridge/deliver
FRAME_BUDGET = 1536 * 1024  # bytes of encoded mail per bridge/deliver (the frame cap is 2 MiB)
STOP_GRACE_S = 5.0  # after SIGTERM, the longest a stop may take
TRANSIENT = {"disk-full", "io-error", "shutting-down", "internal", "too-many-connections"}


class Options:
    def __init__(
        self,
        bench_dir,
        url,
        node=None,
        creds=None,
        token=None,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        insecure=False,
        heartbeat=5.0,
        ack_wait=30.0,
        retry_max=30.0,
    ):
        self.bench_dir, self.url, self.node = bench_dir, url, node
        self.creds, self.token, self.tls_ca = creds, token, tls_ca
        self.tls_cert, self.tls_key = tls_cert, tls_key
        self.insecure, self.heartbeat, self.ack_wait = insecure, heartbeat, ack_wait
        self.retry_max = retry_max


def say(text: str) -> None:
    print(f"bench bridge: {text}", file=sys.stderr, flush=True)


class Backoff:
    def __init__(self, most: float):
        self.attempt = 0
        self.most = most

    def next(self) -> float:
        self.attempt += 1
        return min(self.most, 0.1 * 2 ** min(self.attempt - 1, 10)) * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.attempt = 0


class Bridge:
    def __init__(self, opts: Options):
        self.o = opts
        self.node = ""
        self.nc: NatsClient | None = None
        self.js: JetStreamContext | None = None
        self.kv: KeyValue | None = None
        self.nodes: list[m.NodeInfo] = []
        self.handles: list[str] = []
        self.reporter: Local | None = None
        self.auth_error: BaseException | None = None
        self.tls = None

    # ------------------------------------------------------------ setup

    async def start(self) -> None:
        urls.check_url(self.o.url, bool(self.o.tls_ca or self.o.tls_cert), self.o.insecure)
        self.reporter = await Local(self.o.bench_dir).open()
        hello = await self.reporter.call(m.Hello())
        self.node = hello.node
        if self.o.node and self.o.node != self.node:
            raise WireError(
                "node-mismatch",
                f"--node {self.o.node} but the daemon on {hello.bench_dir} is node "
                f"{self.node} (start it with benchd --node {self.o.node})",
            )
        self.tls = self._tls_context()
        backoff = Backoff(self.o.retry_max)
        while True:
            try:
                await self._connect()
                break
            except (TimeoutError, OSError, NatsError) as err:
                refused = self.auth_error or (err if _is_auth_error(err) else None)
                if refused is not None:
                    raise WireError(
                        "nats-unreachable",
                        f"NATS refused the bridge's credentials ({_describe(refused)}); "
                        "check --creds / --token",
                    ) from None
                await self.retry(f"connect: {_describe(err)}", backoff)
        say(f"node {self.node} connected to {self.o.url}")

    def _tls_context(self):
        """The TLS context for --tls-ca/--tls-cert, made once: a bad file is an error of
        the command line, not something to retry."""
        if not (self.o.tls_ca or self.o.tls_cert):
            return None
        import ssl

        try:
            ctx = ssl.create_default_context(cafile=self.o.tls_ca)
            if self.o.tls_cert:
                ctx.load_cert_chain(self.o.tls_cert, self.o.tls_key)
        except (OSError, ValueError) as err:
            raise WireError("bad-tls", f"the TLS files could not be used: {err}") from None
        return ctx

    async def _connect(self) -> None:
        opts: dict = {
            "servers": [self.o.url],
            "allow_reconnect": True,
            # Bounded for the first connect (so this loop can back off and log
            # bridge/retry); once connected, nats-py reconnects for ever.
            "max_reconnect_attempts": 1,
            "reconnect_time_wait": 0.5,
            "connect_timeout": 2,
            "name": f"bench-bridge-{self.node}",
            "error_cb": self._on_error,
            "disconnected_cb": _quiet,
            "reconnected_cb": _quiet,
        }
        if self.o.creds:
            opts["user_credentials"] = self.o.creds
        if self.o.token:
            opts["token"] = self.o.token
        if self.tls is not None:
            opts["tls"] = self.tls
        nc = await nats.connect(**opts)
        nc.options["max_reconnect_attempts"] = -1
        try:
            js = nc.jetstream(timeout=5)
            await _ensure_stream(js)
            kv = await _ensure_directory(js)
        except BaseException:
            await nc.close()
            raise
        self.nc, self.js, self.kv = nc, js, kv

    async def _on_error(self, err: BaseException) -> None:
        # nats-py reports an auth failure here and then only "no servers available".
        if _is_auth_error(err):
            self.auth_error = err

    async def retry(self, reason: str, backoff: Backoff) -> None:
        delay = backoff.next()
        say(f"{reason}; retrying in {delay:.1f}s")
        assert self.reporter is not None  # start() opened it
        try:
            await self.reporter.call(
                m.BridgeReport(
                    connected=bool(self.nc and self.nc.is_connected),
                    retry=reason,
                    attempt=backoff.attempt,
                    delay=round(delay, 3),
                    stale_after=3 * self.o.heartbeat,
                )
            )
        except WireError as err:
            if err.code == "no-daemon":
                raise
        await asyncio.sleep(delay)

    # ------------------------------------------------------------ run

    async def run(self) -> None:
        await self.start()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.heartbeat())
                tg.create_task(self.forward())
                tg.create_task(self.inbound())
        except* WireError as group:
            raise group.exceptions[0] from None
        finally:
            # Say so at once rather than letting `bench status` find the report stale.
            assert self.reporter is not None  # start() opened it
            try:
                await asyncio.wait_for(self.reporter.call(m.BridgeReport(connected=False)), 2)
            except (WireError, TimeoutError, asyncio.CancelledError):
                pass
            if self.nc is not None:
                await self.nc.close()

    async def forward(self) -> None:
        """Publish the queue in order; the forwarded marks go out on their own connection
        so the next batch is published while the last one's mark is being made durable
        (`after` skips what is published but not yet marked)."""
        local = await Local(self.o.bench_dir).open()
        marks: asyncio.Queue[list[str]] = asyncio.Queue()
        marker = asyncio.create_task(self._mark(marks))
        backoff = Backoff(self.o.retry_max)
        batch: list[m.RemoteMail] = []
        cursor = None
        try:
            while True:
                if marker.done():
                    marker.result()  # the daemon went away: raise it here
                if not batch:
                    batch = (
                        await local.call(m.BridgePull(limit=64, wait=5.0, after=cursor))
                    ).messages
                    if not batch:
                        continue
                try:
                    acks = await asyncio.gather(*(self._publish(x) for x in batch))
                except (TimeoutError, OSError, NatsError) as err:
                    await self.retry(f"publish: {_describe(err)}", backoff)
                    continue  # the same batch again: JetStream drops what it already has
                backoff.reset()
                dups = sum(bool(a.duplicate) for a in acks)
                if dups:
                    say(
                        f"{dups} of {len(batch)} were already in the stream (republished "
                        "after a restart or a lost PubAck; JetStream kept one copy)"
                    )
                cursor = batch[-1].mail_id
                marks.put_nowait([x.mail_id for x in batch])
                batch = []
        finally:
            marker.cancel()

    async def _mark(self, marks: "asyncio.Queue[list[str]]") -> None:
        local = await Local(self.o.bench_dir).open()
        while True:
            ids = await marks.get()
            while not marks.empty():
                ids += marks.get_nowait()
            await local.call(m.BridgeForward(mail_ids=ids))

    async def _publish(self, x: m.RemoteMail):
        handle, node = split_address(x.to, "recipient")  # queued mail names its node
        assert self.js is not None  # connected before any forwarding
        return await self.js.publish(
            urls.subject(node or "", handle),
            _enc.encode(x),
            timeout=5.0,
            stream=urls.STREAM,
            headers={"Nats-Msg-Id": urls.msg_id(x.sender, x.key), "Bench-Node": self.node},
        )

    async def inbound(self) -> None:
        local = await Local(self.o.bench_dir).open()
        backoff = Backoff(self.o.retry_max)
        consumer: Consumer | None = None
        while True:
            try:
                if consumer is None:
                    assert self.nc is not None and self.js is not None  # connected first
                    consumer = await Consumer(
                        self.nc,
                        self.js,
                        urls.STREAM,
                        urls.consumer(self.node),
                        f"{urls.SUBJECT_ROOT}.{urls.token(self.node)}.>",
                        api.ConsumerConfig(ack_wait=self.o.ack_wait, max_ack_pending=4096),
                    ).open()
                # What arrived while the last batch was being delivered is the next
                # batch: the daemon commits it as one group.
                msgs = await consumer.take(DELIVER_MOST)
                await self._deliver(local, msgs)
                backoff.reset()
            except (TimeoutError, OSError, NatsError) as err:
                if consumer is not None:
                    await consumer.close()
                    consumer = None
                await self.retry(f"fetch: {_describe(err)}", backoff)

    async def _deliver(self, local: Local, msgs) -> None:
        groups: list[tuple[str, list, list[m.RemoteMail], int]] = []
        for msg in msgs:
            try:
                mail = _dec.decode(msg.data)
            except msgspec.DecodeError as err:
                say(f"dropped a message that is not bench mail ({err})")
                await msg.term()
                continue
            origin = (msg.headers or {}).get("Bench-Node", "")
            size = len(msg.data)
            g = groups[-1] if groups else None
            if g is None or g[0] != origin or g[3] + size > FRAME_BUDGET:
                groups.append((origin, [], [], 0))
            o, raw, mails, total = groups[-1]
            raw.append(msg)
            mails.append(mail)
            groups[-1] = (o, raw, mails, total + size)
        for origin, raw, mails, _ in groups:
            res = await local.call(m.BridgeDeliver(messages=mails, origin=origin))
            for msg, r in zip(raw, res.results, strict=True):
                if r.error is None:
                    await msg.ack()
                elif r.error.code in TRANSIENT:
                    await msg.nak(delay=1.0)
                else:
                    say(f"refused a message for {msg.subject}: {r.error.message} [{r.error.code}]")
                    await msg.term()

    async def heartbeat(self) -> None:
        while True:
            connected = bool(self.nc and self.nc.is_connected)
            assert self.reporter is not None  # start() opened it
            a = await self.reporter.call(
                m.BridgeReport(
                    connected=connected, nodes=self.nodes, stale_after=3 * self.o.heartbeat
                )
            )
            self.handles = a.handles
            try:
                entry = {
                    "node": self.node,
                    "seen_ms": int(time.time() * 1000),
                    "handles": self.handles,
                }
                assert self.kv is not None  # connected before any heartbeat
                await self.kv.put(urls.token(self.node), json.dumps(entry).encode())
                self.nodes = await self._read_directory()
            except (TimeoutError, OSError, NatsError):
                pass  # the forward and inbound loops report NATS trouble
            await asyncio.sleep(self.o.heartbeat)

    async def _read_directory(self) -> list[m.NodeInfo]:
        out: list[m.NodeInfo] = []
        assert self.kv is not None  # connected before the directory is read
        try:
            keys = await self.kv.keys()
        except NotFoundError:
            return out
        except NatsError as err:
            if "no keys" in str(err).lower():
                return out
            raise
        for k in keys:
            try:
                e = await self.kv.get(k)
                if e.value is None:
                    continue  # an entry without a value: no node to list
                d = json.loads(e.value)
                out.append(
                    m.NodeInfo(
                        node=d["node"],
                        seen_ms=int(d["seen_ms"]),
                        handles=list(d.get("handles") or []),
                    )
                )
            except (NatsError, ValueError, KeyError, TypeError):
                continue
        return out


async def _ensure_stream(js) -> None:
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


async def _ensure_directory(js):
    try:
        return await js.key_value(urls.DIRECTORY)
    except (NotFoundError, NatsError):
        pass
    return await js.create_key_value(bucket=urls.DIRECTORY, history=1)


async def _quiet(*_args) -> None:
    """nats-py callbacks: connection trouble is reported by the loops as bridge/retry."""


def _describe(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _is_auth_error(err: BaseException) -> bool:
    text = str(err).lower()
    return "authorization" in text or "authentication" in text


async def _run(opts: Options) -> None:
    import signal

    task = asyncio.current_task()
    assert task is not None  # a coroutine runs in a task
    loop = asyncio.get_running_loop()

    def stop() -> None:
        task.cancel()
        # A library call that does not give way to the cancellation (a NATS connect
        # attempt in flight) must not keep the process: a bounded stop is as safe as
        # kill -9 here (nothing is marked forwarded or acked before it is durable).
        loop.call_later(STOP_GRACE_S, os._exit, 0)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop)
    try:
        await Bridge(opts).run()
    except asyncio.CancelledError:
        pass  # SIGTERM: a clean stop


def main(opts: Options) -> int:
    try:
        asyncio.run(_run(opts))
    except WireError as err:
        say(f"{err.message} [{err.code}]")
        from bench_wire.errors import exit_code_for

        return exit_code_for(err.code)
    except KeyboardInterrupt:
        return 130
    return 0
