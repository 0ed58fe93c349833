"""The `bridge` benchmark: mail between two nodes over NATS JetStream, against a bare
nats-py publish -> pull round trip on the same nats-server in the same run.

- latency: one message at a time from node1 to bob@node2, from the send to the
  bridge/delivered event on node2 (seen by an event follower); bare: js.publish (PubAck)
  then a pull fetch of that message and its ack.
- throughput: 16 concurrent senders on node1, until the last bridge/delivered on node2;
  bare: 16 concurrent publishers (PubAck each) while one puller fetches and acks.

Also reported, not judged: the floor under those figures, measured on the same nodes in
the same run. A message crosses two durable writes (node1's outbound queue, node2's
mailbox): after each latency sample, one local send on node1 and one on node2 are
timed, and `floor_*` is their sum (`local_send_*` node1's alone); `local_sends_16` is
the rate of node1's local sends with 16 senders (its outbound queue accepts mail no
faster than that).
"""

import asyncio

from tools.perf.harness import (
    BODY,
    Context,
    EventStream,
    Result,
    median,
    ms,
    now_ns,
    p99,
    send_concurrently,
    send_mail,
)

SENDERS = 16


def bridge(ctx: Context) -> list[Result]:
    from tests.nodes import NatsServer, Node, have_bridge, wait_known

    why = have_bridge()
    if why:
        raise RuntimeError(why)
    n_lat = ctx.size(100, 500)
    n_thr = ctx.size(800, 4000)
    nats = NatsServer()
    nats.start()
    n1, n2 = Node("node1", nats), Node("node2", nats)
    try:
        n1.start()
        n2.start()
        n1.start_bridge()
        n2.start_bridge()
        wait_known(n1, n2)
        bare_lat, bare_rate = asyncio.run(_bare(nats.url, n_lat, n_thr))
        lat, local1, local2 = _latency(n1, n2, n_lat)
        rate = _throughput(n1, n2, n_thr)
        local_rate = _local_rate(n1, n_thr)
    finally:
        n1.close()
        n2.close()
        nats.close()
    lp99, bp99 = p99(lat), p99(bare_lat)
    floor = [a + b for a, b in zip(local1, local2, strict=True)]
    common = {"nats_server": "nats-server -js, loopback, file store in /tmp"}
    return [
        Result(
            "bridge/p99",
            "ms",
            ms(lp99),
            ms(bp99),
            lp99 / bp99,
            "<=",
            3.0,
            params=dict(
                common,
                samples=n_lat,
                latency_p50_ms=ms(median(lat)),
                bare_p50_ms=ms(median(bare_lat)),
                latency_p99_ms=ms(lp99),
                bare_p99_ms=ms(bp99),
                floor_p50_ms=ms(median(floor)),
                floor_p99_ms=ms(p99(floor)),
                local_send_p50_ms=ms(median(local1)),
                local_send_p99_ms=ms(p99(local1)),
                baseline="bare nats-py js.publish (PubAck) then pull fetch + ack, sequential",
            ),
        ),
        Result(
            "bridge/sends",
            "sends/s",
            rate,
            bare_rate,
            rate / bare_rate,
            ">=",
            0.3,
            params=dict(
                common,
                senders=SENDERS,
                messages=n_thr,
                local_sends_16=round(local_rate),
                baseline="16 concurrent js.publish (PubAck) + one pull consumer",
            ),
        ),
    ]


def _timed_send(conn, to: str) -> int:
    t0 = now_ns()
    send_mail(conn, to)
    return now_ns() - t0


def _latency(n1, n2, n: int) -> tuple[list[float], list[float], list[float]]:
    """Cross-node latencies, and after each one a local send timed on node1 and on node2."""
    follower = EventStream(n2.dir, "bridge/delivered")
    conn = n1.d.connect()
    conn2 = n2.d.connect()
    out: list[float] = []
    local1: list[float] = []
    local2: list[float] = []
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
    finally:
        conn.close()
        conn2.close()
        follower.close()
    return out, local1, local2


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


async def _bare(url: str, n_lat: int, n_thr: int) -> tuple[list[float], float]:
    import nats as nats_py
    from nats.js import api

    nc = await nats_py.connect(url)
    js = nc.jetstream()
    await js.add_stream(
        name="BARE",
        subjects=["bare.>"],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
    )
    sub = await js.pull_subscribe("bare.>", durable="bare", stream="BARE")
    payload = BODY.encode() if isinstance(BODY, str) else BODY
    lat = []
    for i in range(10 + n_lat):
        t0 = now_ns()
        await js.publish("bare.x", payload, headers={"Nats-Msg-Id": f"l{i}"})
        (msg,) = await sub.fetch(1, timeout=10)
        await msg.ack()
        if i >= 10:
            lat.append(now_ns() - t0)

    got = 0

    async def puller():
        nonlocal got
        while got < n_thr:
            try:
                msgs = await sub.fetch(256, timeout=0.05)
            except nats_py.errors.TimeoutError:
                continue
            for m in msgs:
                await m.ack()
            got += len(msgs)
        return now_ns()

    async def publisher(k: int, count: int):
        for j in range(count):
            await js.publish("bare.y", payload, headers={"Nats-Msg-Id": f"t{k}-{j}"})

    shares = [n_thr // SENDERS + (1 if i < n_thr % SENDERS else 0) for i in range(SENDERS)]
    t0 = now_ns()
    pull = asyncio.create_task(puller())
    await asyncio.gather(*(publisher(k, c) for k, c in enumerate(shares)))
    t1 = await pull
    await js.delete_stream("BARE")
    await nc.close()
    return lat, n_thr / ((t1 - t0) / 1e9)
