"""Receipts between nodes: what became of a node's mail on the node it was sent to.

Sending: the daemon queues a receipt when mail from another node is delivered here or
read here (benchd.runtime.receipts); `send` pulls them (bridge/receipts-pull) and
publishes them, per origin node, on `bench.mail.<origin>.<this node>.@receipts`: under
this node's own subjects, so the per-node NATS users need no new permission, and the
receiver knows who speaks from the subject alone, as for mail. Each publish has a
random Nats-Msg-Id (recording a receipt twice changes nothing, so nothing needs to be
deduplicated, and nobody can claim the id first to have a receipt dropped).

Receiving: the inbound loop hands a receipts message to `record`, which checks its
size and the origin's rate (bench_bridge.admission) and gives it to the daemon
(bridge/receipts); the daemon records only receipts about mail it sent to that node.

Best-effort: receipts waiting to be published are held in memory (at most HELD_MAX);
a receipt lost to a restart leaves its message's state where it was.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import msgspec
from nats.errors import Error as NatsError

from bench_bridge import natsside, urls
from bench_bridge.admission import RECEIPTS_MAX
from bench_bridge.local import open_local
from bench_bridge.output import say
from bench_wire import messages as m
from bench_wire.errors import TRANSIENT_CODES, WireError

if TYPE_CHECKING:  # bridge.py imports this module
    from nats.aio.msg import Msg

    from bench_bridge.bridge import Bridge
    from bench_wire.asyncclient import KeptClient

HELD_MAX = 8192  # receipts pulled from the daemon and not yet published
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(list[m.Receipt])


async def send(bridge: Bridge) -> None:
    """Pull the daemon's receipts and publish them to their nodes, for ever."""
    from bench_bridge.bridge import Backoff  # bridge.py imports this module

    local = await open_local(bridge.o.bench_dir)
    held: list[m.Receipt] = []
    backoff = Backoff(bridge.o.retry_max)
    while True:
        if len(held) < HELD_MAX:
            wait = 0.0 if held else 5.0
            got = await local.call(m.BridgeReceiptsPull(limit=RECEIPTS_MAX, wait=wait))
            held += got.receipts
        if len(held) > HELD_MAX:
            say(f"{len(held) - HELD_MAX} receipts dropped: NATS is not taking them")
            del held[: len(held) - HELD_MAX]
        try:
            while held:
                node = held[0].node
                batch = [r for r in held if r.node == node][:RECEIPTS_MAX]
                await _publish(bridge, node, batch)
                sent = {id(r) for r in batch}
                held = [r for r in held if id(r) not in sent]
            backoff.reset()
        except (TimeoutError, OSError, NatsError) as err:
            await bridge.retry(f"receipts: {natsside.describe(err)}", backoff)


async def _publish(bridge: Bridge, node: str, batch: list[m.Receipt]) -> None:
    assert bridge.js is not None  # connected before any loop runs
    payload = _enc.encode([msgspec.structs.replace(r, node="") for r in batch])
    await bridge.js.publish(
        urls.receipt_subject(node, bridge.node),
        payload,
        stream=urls.STREAM,
        headers={"Nats-Msg-Id": f"{bridge.node} receipts {secrets.token_hex(16)}"},
    )


async def record(bridge: Bridge, local: KeptClient, origin: str, msg: Msg) -> None:
    """A receipts message from `origin` (the subject's node): to the daemon, then acked.
    Malformed, oversized or over the origin's rate: dropped (term), with a line."""
    try:
        receipts = _dec.decode(msg.data)
    except msgspec.DecodeError as err:
        say(f"dropped receipts from node {origin} that are not receipts ({err}) [bad-receipt]")
        await msg.term()
        return
    refusal = bridge.admission.receipts_refusal(origin, len(receipts))
    if refusal is not None:
        if bridge.admission.receipts_said(origin):
            say(f"dropped receipts from node {origin}: {refusal}")
        await msg.term()
        return
    try:
        await local.call(m.BridgeReceipts(receipts=receipts, origin=origin))
    except WireError as err:
        if err.code in TRANSIENT_CODES:
            await msg.nak(delay=1.0)
            return
        if err.code == "no-daemon":
            raise
        say(f"receipts from node {origin} refused: {err.message} [{err.code}]")
        await msg.term()
        return
    await msg.ack()
