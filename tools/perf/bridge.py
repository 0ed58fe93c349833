"""The `bridge` benchmarks: mail between two nodes over NATS JetStream, against the
floor under it, measured on the same nats-server and the same nodes in the same run.

- bridge/p99: one message at a time from node1 to bob@node2, from the send to the
  bridge/delivered event on node2 (seen by an event follower). The floor is what such a
  message cannot avoid: a bare nats-py publish (PubAck) -> pull-consume (+ ack) round
  trip, plus a local durable send on node1 (its outbound queue) and one on node2 (the
  mailbox), each timed right after every cross-node sample (interleaved, so a loaded
  machine weighs on both alike); floor = p99(bare) + p99(local on node1) + p99(local on
  node2). Target: p99 <= 1.5x the floor.
- bridge/sends: 16 concurrent senders on node1 until the last bridge/delivered on node2,
  against node1's own local rate with 16 senders in the same run (its outbound queue
  accepts mail no faster than that). Target: >= 0.5x.
- bridge-cpu: the CPU time (user + system) of both daemons and both bridges over the
  bridge/sends run, per message delivered. Target: <= 1.5 ms.
- bridge-idle: the first message after a quiet spell longer than the daemons' idle
  timeout (--idle-timeout, short here), against a warm message's latency in the same run
  (both sent on a new connection, as a CLI does), medians of each; every cold sample
  and the worst of each are in the row's parameters. Target: <= 2x.
"""

import asyncio
import os
import time

from tests.support.daemon import UNLIMITED
from tools.perf.harness import (
    BODY,
    Context,
    EventStream,
    Result,
    cpu_seconds,
    median,
    ms,
    now_ns,
    p99,
    send_concurrently,
    send_mail,
)

SENDERS = 16
BRIDGE_CPU_US = 1500.0  # the target: CPU of the four processes per bridged message
IDLE_TIMEOUT = "2"  # seconds: the daemons' --idle-timeout, so a quiet spell is short


def bridge(ctx: Context) -> list[Result]:
    from tests.nodes import NatsServer, Node, have_bridge, wait_known

    why = have_bridge()
    if why:
        raise RuntimeError(why)
    n_lat = ctx.size(100, 500)
    n_thr = ctx.size(800, 4000)
    n_idle = ctx.size(1, 5)  # each spell waits for the daemons to close idle connections
    nats = NatsServer()
    nats.start()
    # The sender limits are raised out of the way: this measures the path, not them.
    n1 = Node("node1", nats, "--idle-timeout", IDLE_TIMEOUT, *UNLIMITED)
    n2 = Node("node2", nats, "--idle-timeout", IDLE_TIMEOUT, *UNLIMITED)
    bare = _Bare(nats.url)
    try:
        t0 = time.monotonic()

        def phase(what: str) -> None:
            ctx.log(f"  bridge: {what} ({time.monotonic() - t0:.0f} s in)")

        n1.start()
        n2.start()
        n1.start_bridge()
        n2.start_bridge()
        wait_known(n1, n2)
        phase("nodes up")
        bare.open()
        lat, local1, local2, bare_lat = _latency(n1, n2, n_lat, bare)
        phase("latency done")
        bare.close()  # its loop runs only while sampling: not left to go stale on the server
        # bridge-cpu: what the throughput run cost the four processes that carry mail
        # between the nodes (both daemons, both bridges), per message it delivered.
        pids = [n1.d.proc.pid, n2.d.proc.pid, n1.bridge.pid, n2.bridge.pid]
        c0 = [cpu_seconds(p) for p in pids]
        rate = _throughput(n1, n2, n_thr)
        spent = [cpu_seconds(p) - c for p, c in zip(pids, c0, strict=True)]
        phase("throughput done")
        local_rate = _local_rate(n1, n_thr)
        phase("local rate done")
        closed_seen = [0]  # spells in which both daemons closed an idle connection
        warm, cold = _idle(n1, n2, n_idle, closed_seen)
        phase("idle done")
    finally:
        bare.close()
        n1.close()
        n2.close()
        nats.close()
    lp99 = p99(lat)
    floor = p99(bare_lat) + p99(local1) + p99(local2)
    cold_p50, warm_p50 = median(cold), median(warm)
    per_msg_us = sum(spent) / n_thr * 1e6
    common = {"nats_server": "nats-server -js, loopback, file store in /tmp"}
    return [
        Result(
            "bridge/p99",
            "ms",
            ms(lp99),
            ms(floor),
            lp99 / floor,
            "<=",
            1.5,
            params=dict(
                common,
                samples=n_lat,
                latency_p50_ms=ms(median(lat)),
                latency_p99_ms=ms(lp99),
                bare_p50_ms=ms(median(bare_lat)),
                bare_p99_ms=ms(p99(bare_lat)),
                local1_p99_ms=ms(p99(local1)),
                local2_p99_ms=ms(p99(local2)),
                floor_p99_ms=ms(floor),
                baseline=(
                    "p99 of a bare nats-py publish (PubAck) + pull fetch + ack, plus p99 of a "
                    "local durable send on node1 and on node2, all interleaved with the samples"
                ),
            ),
        ),
        Result(
            "bridge/sends",
            "sends/s",
            rate,
            local_rate,
            rate / local_rate,
            ">=",
            0.5,
            params=dict(
                common,
                senders=SENDERS,
                messages=n_thr,
                local_sends_16=round(local_rate),
                baseline="node1's own local sends/s with 16 senders, same run",
            ),
        ),
        Result(
            "bridge-cpu",
            "us",
            per_msg_us,
            BRIDGE_CPU_US,
            per_msg_us / BRIDGE_CPU_US,
            "<=",
            1.0,
            ratio_note=f"CPU per bridged message / {BRIDGE_CPU_US:g} us",
            params=dict(
                common,
                per_message_us=round(per_msg_us),
                messages=n_thr,
                senders=SENDERS,
                daemon1_us=round(spent[0] / n_thr * 1e6),
                daemon2_us=round(spent[1] / n_thr * 1e6),
                bridge1_us=round(spent[2] / n_thr * 1e6),
                bridge2_us=round(spent[3] / n_thr * 1e6),
                stat=(
                    "user+system (/proc/PID/stat) of both daemons and both bridges over the "
                    "bridge/sends run, per delivered message"
                ),
            ),
        ),
        Result(
            "bridge-idle",
            "ms",
            ms(cold_p50),
            ms(warm_p50),
            cold_p50 / warm_p50,
            "<=",
            2.0,
            params=dict(
                common,
                quiet_spells=n_idle,
                spells_with_idle_closes=closed_seen[0],
                idle_timeout_s=float(IDLE_TIMEOUT),
                cold_ms=[ms(x) for x in cold],
                cold_max_ms=ms(max(cold)),
                warm_p50_ms=ms(warm_p50),
                warm_max_ms=ms(max(warm)),
                baseline=(
                    "median of the first messages after each quiet spell, against the median "
                    "of warm messages; each sent on a new connection, same run"
                ),
            ),
        ),
    ]


class _Bare:
    """A bare nats-py publish -> pull-consume round trip on its own stream, on an event
    loop kept for the whole run so that each sample can be taken between the others."""

    def __init__(self, url: str):
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.nc = self.js = self.sub = None
        self.payload = BODY.encode() if isinstance(BODY, str) else BODY
        self.n = 0

    def open(self) -> None:
        self.loop.run_until_complete(self._open())
        for _ in range(10):
            self.sample()  # warm-up

    async def _open(self) -> None:
        import nats as nats_py
        from nats.js import api

        self.nc = await nats_py.connect(self.url)
        self.js = self.nc.jetstream()
        await self.js.add_stream(
            name="BARE",
            subjects=["bare.>"],
            retention=api.RetentionPolicy.WORK_QUEUE,
            storage=api.StorageType.FILE,
        )
        self.sub = await self.js.pull_subscribe("bare.>", durable="bare", stream="BARE")

    def sample(self) -> int:
        return self.loop.run_until_complete(self._round_trip())

    async def _round_trip(self) -> int:
        self.n += 1
        t0 = now_ns()
        await self.js.publish("bare.x", self.payload, headers={"Nats-Msg-Id": f"l{self.n}"})
        (msg,) = await self.sub.fetch(1, timeout=10)
        await msg.ack()
        return now_ns() - t0

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            if self.nc is not None:
                self.loop.run_until_complete(self._close())
        except Exception:  # noqa: BLE001 - tidying up must not hide the figures
            pass
        finally:
            self.loop.close()

    async def _close(self) -> None:
        try:
            await self.js.delete_stream("BARE")
        finally:
            await self.nc.close()


def _timed_send(conn, to: str) -> int:
    t0 = now_ns()
    send_mail(conn, to)
    return now_ns() - t0


def _latency(n1, n2, n: int, bare: _Bare):
    """Cross-node latencies, and after each one a local send timed on node1 and on node2
    and a bare NATS round trip."""
    follower = EventStream(n2.dir, "bridge/delivered")
    conn = n1.d.connect()
    conn2 = n2.d.connect()
    out: list[float] = []
    local1: list[float] = []
    local2: list[float] = []
    bare_lat: list[float] = []
    try:
        for _ in range(10):  # warm-up (the local mailboxes made too)
            send_mail(conn, "warm@node2")
            send_mail(conn, "dave")
            send_mail(conn2, "dave")
        follower.wait(lambda: len(follower.events) >= 10, 60, "warm-up deliveries")
        for _ in range(n):
            seen = len(follower.events)
            t0 = now_ns()
            send_mail(conn, "bob@node2")
            follower.wait(lambda s=seen: len(follower.events) > s, 60, "a delivery")
            out.append(follower.events[seen][0] - t0)
            local1.append(_timed_send(conn, "dave"))
            local2.append(_timed_send(conn2, "dave"))
            bare_lat.append(bare.sample())
    finally:
        conn.close()
        conn2.close()
        follower.close()
    return out, local1, local2, bare_lat


def _idle_closes(node) -> int:
    try:
        with open(os.path.join(node.dir, "benchd.log")) as f:
            return sum("connection idle timeout" in x for x in f)
    except OSError:
        return 0


def _idle(n1, n2, spells: int, closed_seen: list[int]) -> tuple[list[float], list[float]]:
    """Warm latencies (a message right after another), then for each quiet spell the
    latency of the first message after it; every send on a new connection."""
    follower = EventStream(n2.dir, "bridge/delivered")

    def mine() -> list[int]:
        # The follower replays the log first: only this phase's deliveries count.
        return [t for t, e in follower.events if e["to"] == "idle"]

    def one() -> float:
        seen = len(mine())
        conn = n1.d.connect()
        try:
            t0 = now_ns()
            send_mail(conn, "idle@node2")
        finally:
            conn.close()
        follower.wait(lambda: len(mine()) > seen, 120, "a delivery")
        return mine()[seen] - t0

    try:
        warm = [one() for _ in range(20)]
        cold = []
        for _ in range(spells):
            # Quiet until each daemon has closed a connection as idle (and half an idle
            # timeout more: the reaper checks a tenth of it apart), or for two and a half
            # idle timeouts at most: a bridge that holds no connection open while quiet
            # leaves nothing to close, and the spell is just as long as the timeout says.
            c1, c2 = _idle_closes(n1), _idle_closes(n2)
            quiet_until = time.monotonic() + 2.5 * float(IDLE_TIMEOUT)
            while time.monotonic() < quiet_until:
                if _idle_closes(n1) > c1 and _idle_closes(n2) > c2:
                    closed_seen[0] += 1
                    time.sleep(float(IDLE_TIMEOUT) / 2)
                    break
                time.sleep(0.05)
            cold.append(one())
            warm.append(one())
    finally:
        follower.close()
    return warm, cold


def _local_rate(n1, total: int) -> float:
    return total / (send_concurrently(n1.dir, "dave", total, SENDERS) / 1e9)


def _throughput(n1, n2, total: int) -> float:
    follower = EventStream(n2.dir, "bridge/delivered")
    try:
        start = now_ns()
        send_concurrently(n1.dir, "carol@node2", total, SENDERS)
        follower.wait(
            lambda: sum(e["to"] == "carol" for _, e in follower.events) >= total,
            300,
            f"{total} deliveries",
        )
        last = max(t for t, e in follower.events if e["to"] == "carol")
    finally:
        follower.close()
    return total / ((last - start) / 1e9)
