"""Receipts between nodes: what became of a node's mail on the node it was sent to
(docs/nodes.md, "Receipts"). Best-effort: at most HELD_MAX wait in memory.
"""

import secrets
from collections.abc import Awaitable, Callable

import msgspec
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from bench_bridge import natsside, urls
from bench_bridge.admission import RECEIPTS_MAX, Admission
from bench_bridge.local import open_local, say
from bench_bridge.natsside import Backoff
from bench_bridge.options import Options
from bench_wire import messages as m
from bench_wire.asyncclient import KeptClient
from bench_wire.errors import TRANSIENT_CODES, WireError

# Say a failure, report it to the daemon and wait the back-off (Bridge.retry).
Retry = Callable[[str, Backoff], Awaitable[None]]
HELD_MAX = 8192  # receipts pulled from the daemon and not yet published
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(list[m.Receipt])


async def send(opts: Options, js: JetStreamContext, node: str, retry: Retry) -> None:
    """Pull the daemon's receipts and publish them to their nodes, for ever."""
    local = await open_local(opts.bench_dir)
    held: list[m.Receipt] = []
    backoff = Backoff(opts.retry_max)
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
                to = held[0].node
                batch = [r for r in held if r.node == to][:RECEIPTS_MAX]
                await _publish(js, node, to, batch)
                sent = {id(r) for r in batch}
                held = [r for r in held if id(r) not in sent]
            backoff.reset()
        except (TimeoutError, OSError, NatsError) as err:
            await retry(f"receipts: {natsside.describe(err)}", backoff)


async def _publish(js: JetStreamContext, node: str, to: str, batch: list[m.Receipt]) -> None:
    # A random Nats-Msg-Id: recording a receipt twice changes nothing, and nobody can
    # claim the id first to have a receipt dropped.
    payload = _enc.encode([msgspec.structs.replace(r, node="") for r in batch])
    await js.publish(
        urls.receipt_subject(to, node),
        payload,
        stream=urls.STREAM,
        headers={"Nats-Msg-Id": f"{node} receipts {secrets.token_hex(16)}"},
    )


async def record(admission: Admission, local: KeptClient, origin: str, msg: Msg) -> None:
    """A receipts message from `origin` to the daemon, then acked; malformed, oversized or
    over the origin's rate: dropped, with a line."""
    try:
        receipts = _dec.decode(msg.data)
    except msgspec.DecodeError as err:
        say(f"dropped receipts from node {origin} that are not receipts ({err}) [bad-receipt]")
        await msg.term()
        return
    refusal = admission.receipts_refusal(origin, len(receipts))
    if refusal is not None:
        if admission.receipts_said(origin):
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
