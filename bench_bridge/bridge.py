"""The bridge: a client of its local daemon and of NATS JetStream. Four loops, each on its
own daemon connection: forward, inbound, receipts and heartbeat (docs/nodes.md, "How a
message travels", follows a message through them).
"""

import asyncio
import os
import ssl
import time

import msgspec
import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from bench_bridge import admission, natsside, receipts, streams, urls
from bench_bridge.admission import Admission
from bench_bridge.forwarding import Forwarding
from bench_bridge.local import open_local, say
from bench_bridge.natsside import Backoff, Consumer
from bench_bridge.options import Options, Quotas
from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.asyncclient import KeptClient
from bench_wire.errors import TRANSIENT_CODES as TRANSIENT
from bench_wire.errors import WireError, exit_code_for

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(m.RemoteMail)
DELIVER_MOST = 256  # messages per bridge/deliver
FRAME_BUDGET = 1536 * 1024  # bytes of encoded mail per bridge/deliver (the frame cap is 2 MiB)
STOP_GRACE_S = 5.0  # after SIGTERM, the longest a stop may take


class Bridge:
    def __init__(self, opts: Options):
        self.o = opts
        self.limits = admission.Limits.of(opts)
        self.node = ""
        self.nc: NatsClient | None = None
        self.js: JetStreamContext | None = None
        self.kv: KeyValue | None = None
        self.nodes: list[m.NodeInfo] = []
        self.handles: list[str] = []
        self.instance = ""
        self.skipped: dict[str, int] = {}  # key -> revision of an entry reported as skipped
        self.observed: dict[str, tuple[int, int]] = {}  # key -> (revision, first read ms)
        self.dropped = 0  # nodes left out for --nodes-max at the last read
        self.reporter: KeptClient | None = None
        self.auth_error: BaseException | None = None
        self.tls: ssl.SSLContext | None = None
        self.admission = Admission(
            opts.reply_to_max, opts.new_mailboxes_per_hour, opts.receipts_per_minute
        )
        self.checked = 0.0  # when the streams' configuration was last found right (monotonic)
        self.recheck = False  # set on a reconnect
        self.down_at: float | None = None  # when the connection was lost (monotonic)
        self.closing = False  # our own close: not an outage

    # ------------------------------------------------------------ setup

    async def start(self) -> None:
        self.o.conn.check()
        self.reporter = await open_local(self.o.bench_dir)
        hello = await self.reporter.call(m.Hello())
        self.node = hello.node
        if self.o.node and self.o.node != self.node:
            raise WireError(
                "node-mismatch",
                f"--node {self.o.node} but the daemon on {hello.bench_dir} is node "
                f"{self.node} (start it with benchd --node {self.o.node})",
            )
        self.tls = self.o.conn.tls()
        self.instance = natsside.instance(hello.bench_dir)
        backoff = Backoff(self.o.retry_max)
        while True:
            try:
                await self._connect()
                break
            except (TimeoutError, OSError, NatsError) as err:
                refused = self.auth_error or (err if natsside.is_auth_error(err) else None)
                if refused is not None:
                    raise WireError(
                        "nats-unreachable",
                        f"NATS refused the bridge's credentials ({natsside.describe(refused)}); "
                        "check --creds / --token",
                    ) from None
                await self.retry(f"connect: {natsside.describe(err)}", backoff)
        await self._check_name()
        say(f"node {self.node} connected to {urls.shown(self.o.conn.url)}")

    async def _connect(self) -> None:
        # nats.connect takes the servers typed and the rest as untyped keywords.
        opts: dict[str, object] = {
            "allow_reconnect": True,
            # Bounded for the first connect (so this loop can back off and log
            # bridge/retry); once connected, nats-py reconnects for ever.
            "max_reconnect_attempts": 1,
            "reconnect_time_wait": 0.5,
            "connect_timeout": 2,
            "name": f"bench-bridge-{self.node}",
            # Replies (PubAcks, pulled mail, directory reads) come to inboxes under the
            # node's own prefix, so NATS can let each node read only its own.
            "inbox_prefix": urls.inbox_prefix(self.node),
            "error_cb": self._on_error,
            "disconnected_cb": self._disconnected,
            "reconnected_cb": self._reconnected,
            **self.o.conn.auth(self.tls),
        }
        nc = await nats.connect([self.o.conn.url], **opts)
        nc.options["max_reconnect_attempts"] = -1
        try:
            js = nc.jetstream(timeout=5, publish_async_max_pending=self.o.publish_window)
            await self.check_streams(js)
            kv = await js.key_value(urls.DIRECTORY)
        except BaseException:
            await self._close(nc)
            raise
        self.nc, self.js, self.kv = nc, js, kv
        self.down_at = None  # a new connection is up: the next loss is news

    async def _on_error(self, err: BaseException) -> None:
        # nats-py reports an auth failure here and then only "no servers available".
        if natsside.is_auth_error(err):
            self.auth_error = err

    async def check_streams(self, js: JetStreamContext) -> None:
        """Raise stream-misconfigured or stream-missing (bench_bridge.streams.check)."""
        forget = self.limits.forget_s
        await streams.check(js, self.o.max_age, Quotas(forget_after=forget))
        self.checked = time.monotonic()
        self.recheck = False

    async def _close(self, nc: NatsClient) -> None:
        self.closing = True
        try:
            await nc.close()
        finally:
            self.closing = False

    # A loss is said at once (nats-py reconnects on its own and would say nothing), and
    # the streams are checked again after a reconnect (the server may be another).

    async def _disconnected(self) -> None:
        if self.closing or self.down_at is not None:
            return
        self.down_at = time.monotonic()
        say(f"lost the connection to NATS ({urls.shown(self.o.conn.url)}); reconnecting")
        await self._tell("disconnected")

    async def _reconnected(self) -> None:
        down = time.monotonic() - self.down_at if self.down_at is not None else 0.0
        self.down_at = None
        self.recheck = True
        say(f"reconnected to NATS after {down:.1f}s")
        await self._tell("reconnected", down)

    async def _tell(self, change: str, down_s: float = 0.0) -> None:
        """Tell the daemon now, not at the next heartbeat."""
        if self.reporter is None:
            return
        report = m.BridgeReport(
            connected=change == "reconnected",
            stale_after=3 * self.o.heartbeat,
            link=change,
            down_s=round(down_s, 3),
        )
        try:
            await self.reporter.call(report)
        except WireError:
            pass  # the daemon is gone: the loops find out and stop

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
        fatal: WireError | None = None
        try:
            await self.start()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.heartbeat())
                tg.create_task(self.forward())
                tg.create_task(self.inbound())
                assert self.js is not None  # start() connected
                tg.create_task(receipts.send(self.o, self.js, self.node, self.retry))
        except* WireError as group:
            err = group.exceptions[0]
            assert isinstance(err, WireError)
            fatal = err
            raise err from None
        finally:
            await self._stopped(fatal if fatal and fatal.code != "no-daemon" else None)

    async def _stopped(self, err: WireError | None) -> None:
        """Say so at once rather than letting `bench status` find the report stale."""
        if self.reporter is None:
            return
        error = None if err is None else m.ErrorBody(err.code, err.message)
        try:
            await asyncio.wait_for(
                self.reporter.call(m.BridgeReport(connected=False, error=error)), 2
            )
        except (WireError, TimeoutError, asyncio.CancelledError):
            pass
        if self.nc is not None:
            await self._close(self.nc)

    async def forward(self) -> None:
        """Publish the queue (Forwarding); the forwarded marks go out on their own
        connection, so publishing goes on while the last ones are being made durable."""
        local = await open_local(self.o.bench_dir)
        marks: asyncio.Queue[list[str]] = asyncio.Queue()
        marker = asyncio.create_task(self._mark(marks))
        backoff = Backoff(self.o.retry_max)
        cursor: str | None = None  # the last message acknowledged by JetStream
        try:
            while True:
                run = Forwarding(self._publish_async, self.o.publish_window, local, marks, cursor)
                try:
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(run.pull())
                        tg.create_task(run.settle())
                        tg.create_task(_watch(marker))
                except ExceptionGroup as group:
                    err = _first(group)
                    if not isinstance(err, (TimeoutError, OSError, NatsError)):
                        raise err from None  # the daemon went away (no-daemon)
                    cursor = run.cursor
                    run.abandon()
                    # A pull may have been cut off before its answer was read: the
                    # connection is not reused (the next call opens a new one).
                    local.close()
                    if run.settled:
                        backoff.reset()
                    await self.retry(f"publish: {natsside.describe(err)}", backoff)
        finally:
            marker.cancel()

    async def _mark(self, marks: "asyncio.Queue[list[str]]") -> None:
        local = await open_local(self.o.bench_dir)
        while True:
            ids = await marks.get()
            while not marks.empty():
                ids += marks.get_nowait()
            await local.call(m.BridgeForward(mail_ids=ids))

    async def _publish_async(self, x: m.RemoteMail) -> "asyncio.Future[api.PubAck]":
        """Publish without waiting: the future is the PubAck."""
        handle, node = split_address(x.to, "recipient")  # queued mail names its node
        assert self.js is not None  # connected before any forwarding
        return await self.js.publish_async(
            urls.subject(node or "", self.node, handle),
            _enc.encode(x),
            stream=urls.STREAM,
            headers={"Nats-Msg-Id": natsside.msg_id(self.node, x)},
        )

    async def inbound(self) -> None:
        local = await open_local(self.o.bench_dir)
        backoff = Backoff(self.o.retry_max)
        consumer: Consumer | None = None
        while True:
            try:
                if consumer is None:
                    assert self.nc is not None and self.js is not None  # connected first
                    consumer = await Consumer(self.nc, self.js, self.node, self.o.ack_wait).open()
                # What arrived while the last batch was being delivered is the next
                # batch: the daemon commits it as one group.
                msgs = await consumer.take(DELIVER_MOST)
                await self._deliver(local, msgs)
                backoff.reset()
            except (TimeoutError, OSError, NatsError) as err:
                if consumer is not None:
                    await consumer.close()
                    consumer = None
                await self.retry(f"fetch: {natsside.describe(err)}", backoff)

    async def _deliver(self, local: KeptClient, msgs: list[Msg]) -> None:
        groups: list[tuple[str, list[Msg], list[m.RemoteMail], int]] = []
        refused: list[tuple[str, Msg, m.RemoteMail, m.ErrorBody]] = []
        known = {n.node for n in self.nodes}
        for msg in msgs:
            # The origin is the subject's: NATS let only that node's user publish on it.
            origin = urls.origin_of(msg.subject)
            if origin is None:
                say(f"dropped a message on {msg.subject}: not a bench mail subject")
                await msg.term()
                continue
            if urls.is_receipts(msg.subject):
                # Receipts need no heartbeat first: the daemon checks each against
                # the mail it sent to that node.
                await receipts.record(self.admission, local, origin, msg)
                continue
            try:
                mail = _dec.decode(msg.data)
            except msgspec.DecodeError as err:
                say(f"dropped a message that is not bench mail ({err})")
                await msg.term()
                continue
            if admission.parts(mail.sender)[1] != origin:
                say(
                    f"dropped a message from {mail.sender!r} published by node {origin}: "
                    "a node speaks only for its own addresses [forged-sender]"
                )
                await msg.term()
                continue
            if origin not in known:
                # A node whose first heartbeat we have not read yet: its entry is due.
                await msg.nak(delay=self.o.heartbeat)
                continue
            age = natsside.age_s(msg)
            if age > self.o.max_age:
                why = (
                    f"it waited {age:.0f} s for node {self.node} to take it, "
                    f"longer than the maximum age of {self.o.max_age:g} s"
                )
                refused.append((origin, msg, mail, m.ErrorBody("expired", why)))
                continue
            refusal = self.admission.refusal(origin, mail, self.handles)
            if refusal is not None:
                refused.append((origin, msg, mail, refusal))
                continue
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
        for origin, msg, mail, refusal in refused:
            await self._return(local, origin, msg, mail, refusal)

    async def _return(
        self, local: KeptClient, origin: str, msg: Msg, mail: m.RemoteMail, error: m.ErrorBody
    ) -> None:
        """Mail this bridge will not deliver (expired, or over an admission cap): bounced."""
        res = await local.call(m.BridgeBounce(message=mail, origin=origin, error=error))
        if res.error is not None and res.error.code in TRANSIENT:
            await msg.nak(delay=1.0)
            return
        say(
            f"returned {mail.mail_id} from {mail.sender} to its sender: {error.message} "
            f"[{error.code}]"
        )
        await msg.term()

    async def heartbeat(self) -> None:
        """Put our entry, read the directory and report it at once (so `bench nodes` is
        not a beat older than the entries); put again at once when the handles changed."""
        assert self.reporter is not None  # start() opened it
        self.handles = (await self.reporter.call(m.BridgeReport(connected=True))).handles
        while True:
            put = list(self.handles)
            nodes: list[m.NodeInfo] | None = None
            skipped: list[m.ErrorBody] = []
            try:
                due = self.recheck or time.monotonic() - self.checked > streams.CHECK_EVERY_S
                if due and self.js is not None:
                    await self.check_streams(self.js)  # raises: the bridge stops
                await self._put(put)
                nodes, skipped = await self._read_directory()
                self.nodes = nodes
            except (TimeoutError, OSError, NatsError):
                pass  # the forward and inbound loops report NATS trouble
            a = await self.reporter.call(
                m.BridgeReport(
                    connected=bool(self.nc and self.nc.is_connected),
                    nodes=nodes,
                    stale_after=3 * self.o.heartbeat,
                    forget_after=self.limits.forget_s,
                    skipped=skipped,
                )
            )
            self.handles = a.handles
            if self.handles != put:
                continue  # a spawn or an exit: the other nodes hear of it now
            # Twice per heartbeat: `bench nodes` is then at most one beat behind.
            await asyncio.sleep(self.o.heartbeat / 2)

    async def _put(self, handles: list[str]) -> None:
        assert self.kv is not None  # connected before any heartbeat
        now = int(time.time() * 1000)
        value = admission.encode_entry(self.node, now, handles, self.instance)
        await self.kv.put(self.node, value)  # a node's key is its name

    async def _check_name(self) -> None:
        """Refuse to run when another bridge instance heartbeats under our node name."""
        assert self.kv is not None  # connected first
        now = int(time.time() * 1000)
        try:
            e = await self.kv.get(self.node)
            entry = admission.decode_entry(self.node, e.value or b"", now, self.limits)
        except (NatsError, TimeoutError, WireError):
            return  # no entry yet (or none readable): the name is free
        self._refuse_if_taken(entry, now)

    def _refuse_if_taken(self, entry: admission.Entry, now: int) -> None:
        fresh = 3 * self.o.heartbeat * 1000
        other = admission.taken_by(entry, self.instance, now, fresh)
        if other is not None:
            raise WireError(
                "node-name-taken",
                f"another bridge (instance {other}) is heartbeating as node {self.node}: "
                "two daemons with one node name would split its mail; give one of them "
                "another name (benchd --node NAME)",
            )

    async def _read_directory(self) -> tuple[list[m.NodeInfo], list[m.ErrorBody]]:
        """The other nodes, and the entries skipped for the first time (per revision)."""
        assert self.kv is not None and self.js is not None  # connected first
        # The keys read last time are read again too: only a get that finds nothing
        # forgets one.
        listed = await natsside.directory_keys(self.js)
        keys = list(dict.fromkeys([*listed, *self.observed]))
        entries: list[admission.Entry] = []
        skipped: list[m.ErrorBody] = []
        now = int(time.time() * 1000)
        for k in keys:
            try:
                e = await self.kv.get(k)
            except NotFoundError:
                e = None
            if e is None or e.value is None:
                self.observed.pop(k, None)
                continue  # deleted or purged (since the listing, or since the last read)
            # An entry cannot be newer than the first read of its revision: a `seen` in
            # the future (a clock ahead, or a lie) ages like any other from then on.
            rev = e.revision or 0
            at = self.observed.get(k)
            if at is None or at[0] != rev:
                at = self.observed[k] = (rev, now)
            try:
                entry = admission.decode_entry(k, e.value, at[1], self.limits)
            except WireError as skip:
                if self.skipped.get(k) != e.revision:
                    self.skipped[k] = e.revision or 0
                    say(f"skipped a directory entry: {skip.message} [{skip.code}]")
                    skipped.append(m.ErrorBody(skip.code, skip.message[:500]))
                continue
            self.skipped.pop(k, None)
            if k == self.node:
                self._refuse_if_taken(entry, now)
                continue
            entries.append(entry)
        nodes, dropped = admission.listing(entries, self.node, now, self.limits)
        if dropped and dropped != self.dropped:
            text = (
                f"the directory lists {len(nodes) + dropped} nodes, more than the cap of "
                f"{self.limits.nodes_max}; the {dropped} least recently seen were left out"
            )
            say(f"{text} [too-many-nodes]")
            skipped.append(m.ErrorBody("too-many-nodes", text))
        self.dropped = dropped
        return nodes, skipped


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
        return exit_code_for(err.code)
    except KeyboardInterrupt:
        return 130
    return 0


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


async def _watch(task: asyncio.Task[None]) -> None:
    """Raise what `task` raised (the marker: the daemon went away) in a task group."""
    await asyncio.wait({task})
    task.result()
    raise AssertionError("the marker never returns")
