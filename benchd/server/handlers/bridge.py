"""The bridge's handlers (bench_bridge, acting for the operator; authority.check keeps
its verbs the operator's): the outbound queue pulled and marked forwarded, inbound mail
delivered, the bridge's reports, receipts both ways; and bridge/nodes for anyone. They
alone get `svc.bridge`, to queue all of a request's ops before waiting on any, so one
request commits as one batch."""

from bench_wire import messages as m
from bench_wire.addresses import split_address
from bench_wire.errors import TRANSIENT_CODES, WireError
from benchd.core import frontmatter
from benchd.core.authority import Caller
from benchd.core.names import MAIL_ID_RE, check_mail_id, is_handle
from benchd.runtime.mailroom import RetireOp, SendOp
from benchd.runtime.nodes import OUTBOUND
from benchd.runtime.outbound import PULL_MAX, forward_op, is_bounce
from benchd.server.connection import Connection
from benchd.server.wiring import Services
from benchd.store.index import UNREAD
from benchd.store.mailstates import StateRow


async def pull(svc: Services, conn: Connection, caller: Caller, req: m.BridgePull) -> None:
    if not 1 <= req.limit <= PULL_MAX:
        raise WireError("bad-limit", f"limit {req.limit} is outside 1-{PULL_MAX}")
    if req.after is not None:
        check_mail_id(req.after)
    rows = svc.index.page(OUTBOUND, UNREAD, req.after, req.limit)[: req.limit]
    if not rows and req.wait > 0:
        await svc.outbound.wait_queued(min(req.wait, 60.0))
        rows = svc.index.page(OUTBOUND, UNREAD, req.after, req.limit)[: req.limit]
    out = []
    for row in rows:
        mail = svc.outbound.queued_mail(row.mail_id)
        if mail is not None:  # else forwarded meanwhile
            out.append(mail)
    await conn.send(m.PullOk(id=req.id, messages=out))


async def forwarded(svc: Services, conn: Connection, caller: Caller, req: m.BridgeForward) -> None:
    ops: list[RetireOp] = []
    for mail_id in req.mail_ids:
        check_mail_id(mail_id)
        row = svc.index.get(OUTBOUND, mail_id)
        if row is None or row.state != UNREAD:
            continue  # already marked (a bridge restarted between publish and mark)
        try:
            mail = svc.outbound.queued_mail(mail_id)
        except (OSError, frontmatter.BadMailFile, UnicodeDecodeError):
            mail = None  # the event then names no address; the mark is what matters
        to = mail.to if mail is not None else ""
        ops.append(forward_op(svc.mailroom, mail_id, row.key, to))
    for op in ops:
        svc.bridge.enqueue(op)
    n = 0
    for op in ops:
        if await op.wait():
            n += 1
            svc.outbound.forgotten(op.spec.mail_id)
    await conn.send(m.ForwardOk(id=req.id, forwarded=n))


async def deliver(svc: Services, conn: Connection, caller: Caller, req: m.BridgeDeliver) -> None:
    origin = req.origin if is_handle(req.origin) and req.origin != svc.outbound.node else "unknown"
    ops: list[SendOp | WireError] = []
    for msg in req.messages:
        try:
            ops.append(svc.outbound.inbound_op(msg, origin))
        except WireError as err:
            ops.append(err)
    for op in ops:
        if isinstance(op, SendOp):
            svc.bridge.enqueue(op)
    results: list[m.Delivered] = []
    for msg, op in zip(req.messages, ops, strict=True):
        if isinstance(op, WireError):
            results.append(await _refused(svc, msg, origin, op))
            continue
        try:
            res = await op.wait()
            results.append(m.Delivered(mail_id=res.mail_id, duplicate=res.duplicate))
        except WireError as err:
            results.append(await _refused(svc, msg, origin, err))
    await conn.send(m.DeliverOk(id=req.id, results=results))


async def _refused(svc: Services, msg: m.RemoteMail, origin: str, err: WireError) -> m.Delivered:
    """A refusal for good is returned to the sender (a bounce); the answer still names
    the refusal. When the bounce itself cannot be queued now, the answer is that error,
    so the bridge has the message delivered again later."""
    refusal = m.ErrorBody(err.code, err.message)
    # A bounce is never bounced: one that meets a full mailbox waits in the stream and is
    # delivered again later, like a transient failure, rather than being dropped.
    if err.code in TRANSIENT_CODES or (err.code == "mailbox-full" and is_bounce(msg.sender)):
        return m.Delivered(error=refusal)
    try:
        await svc.outbound.bounce(msg, origin, refusal)
    except WireError as trouble:
        return m.Delivered(error=m.ErrorBody(trouble.code, trouble.message))
    return m.Delivered(error=refusal)


async def bounce(svc: Services, conn: Connection, caller: Caller, req: m.BridgeBounce) -> None:
    origin = req.origin if is_handle(req.origin) and req.origin != svc.outbound.node else "unknown"
    try:
        mail_id = await svc.outbound.bounce(req.message, origin, req.error)
    except WireError as err:
        await conn.send(m.BounceOk(id=req.id, error=m.ErrorBody(err.code, err.message)))
        return
    await conn.send(m.BounceOk(id=req.id, mail_id=mail_id))


async def report(svc: Services, conn: Connection, caller: Caller, req: m.BridgeReport) -> None:
    # The skipped entries are logged before the directory changes, so whoever sees the
    # new directory (`bench nodes`) also finds why an entry is missing from it.
    for skip in req.skipped[:64]:
        svc.bridge.log.warning(
            "bridge skipped a directory entry", code=skip.code, reason=skip.message
        )
        await svc.bridge.record(m.BridgeSkipped(code=skip.code, reason=skip.message[:500]))
    for node in svc.outbound.bridge_reported(req):
        svc.bridge.log.info("node forgotten", node=node)
        await svc.bridge.record(m.BridgeForgotten(node=node))
    if req.error is not None:
        svc.bridge.log.error("bridge stopped", code=req.error.code, reason=req.error.message)
        await svc.bridge.record(
            m.BridgeStopped(code=req.error.code, reason=req.error.message[:500])
        )
    if req.link == "disconnected":
        svc.bridge.log.warning("bridge lost its NATS connection; it reconnects on its own")
        await svc.bridge.record(m.BridgeDisconnected())
    elif req.link == "reconnected":
        svc.bridge.log.info("bridge reconnected to NATS", down_s=req.down_s)
        await svc.bridge.record(m.BridgeReconnected(down_s=req.down_s))
    if req.retry is not None:
        await svc.bridge.record(
            m.BridgeRetry(reason=req.retry[:500], attempt=req.attempt, delay=req.delay)
        )
    handles = sorted(svc.roster.live)
    await conn.send(m.BridgeReportOk(id=req.id, node=svc.outbound.node, handles=handles))


RECEIPTS_MAX = 256  # receipts in one bridge/receipts or bridge/receipts-pull
IGNORED_SAID_MAX = 16  # bridge/receipt-ignored events per request (the rest are counted)
READ_BY = ("read", "wake")


async def receipts_pull(
    svc: Services, conn: Connection, caller: Caller, req: m.BridgeReceiptsPull
) -> None:
    if not 1 <= req.limit <= RECEIPTS_MAX:
        raise WireError("bad-limit", f"limit {req.limit} is outside 1-{RECEIPTS_MAX}")
    got = await svc.receipts.pull(req.limit, min(max(req.wait, 0.0), 60.0))
    await conn.send(m.ReceiptsPullOk(id=req.id, receipts=got))


async def receipts(svc: Services, conn: Connection, caller: Caller, req: m.BridgeReceipts) -> None:
    """Receipts from node `origin` (the subject they came on named it): each is recorded
    only when it speaks of mail sent from here to that node, so no node can mark another
    node's mail delivered or read; the others are ignored, each said by an event."""
    if len(req.receipts) > RECEIPTS_MAX:
        raise WireError(
            "bad-request", f"{len(req.receipts)} receipts in one request, at most {RECEIPTS_MAX}"
        )
    origin = req.origin if is_handle(req.origin) and req.origin != svc.outbound.node else ""
    ignored = 0
    now = svc.outbound.wall.wall_ms()
    events: list[m.Event] = []
    for r in req.receipts:
        row = svc.index.get_state(r.mail_id) if MAIL_ID_RE.fullmatch(r.mail_id) else None
        why = _unrecordable(origin, r, row)
        if why is not None:
            ignored += 1
            if ignored <= IGNORED_SAID_MAX:
                code, reason = why
                events.append(
                    m.BridgeReceiptIgnored(
                        node=origin or "unknown", mail_id=r.mail_id[:64], code=code, reason=reason
                    )
                )
            continue
        assert row is not None and row.queued is not None  # _unrecordable checked it
        if (row.delivered if r.state == "delivered" else row.read_at) is not None:
            continue  # said before (a redelivery, or a node repeating itself): no new event
        at = max(row.queued, min(r.at, now))  # no earlier than queued, no later than now
        by = r.by if r.state == "read" else ""
        events.append(m.BridgeReceipt(mail_id=r.mail_id, node=origin, state=r.state, at=at, by=by))
    # One batch for the whole message; not written (disk trouble): the bridge gets it
    # again from the stream later.
    if events and not await svc.bridge.record(*events):
        raise WireError("io-error", "the receipts could not be logged; try again")
    recorded = sum(isinstance(e, m.BridgeReceipt) for e in events)
    if ignored > IGNORED_SAID_MAX:
        svc.bridge.log.warning(
            "receipts ignored", node=origin or "unknown", ignored=ignored, said=IGNORED_SAID_MAX
        )
    await conn.send(m.ReceiptsOk(id=req.id, recorded=recorded, ignored=ignored))


def _unrecordable(origin: str, r: m.Receipt, row: StateRow | None) -> tuple[str, str] | None:
    """Why this receipt from `origin` is not recorded (code, reason), or None; `row` is
    the state row of the message it names (pending changes included: no commit here)."""
    if not origin:
        return "bad-receipt", "the receipt names no other node as its origin"
    if r.state not in ("delivered", "read") or (r.state == "read" and r.by not in READ_BY):
        said = f"{r.state[:32]!r} (by {r.by[:32]!r})"  # the other node's words: kept short
        return "bad-receipt", f"{said} is not a state a receipt tells"
    if MAIL_ID_RE.fullmatch(r.mail_id) is None:
        return "bad-receipt", "its message id is not one"
    if row is None or row.queued is None or not row.rcpt:
        return "unknown-mail", f"no message {r.mail_id} was sent from here to another node"
    try:
        to_node = split_address(row.rcpt)[1]
    except WireError:
        to_node = None
    if to_node != origin:
        return "wrong-node", f"{r.mail_id} was sent to {row.rcpt}, not to node {origin}"
    return None


async def nodes(svc: Services, conn: Connection, caller: Caller, req: m.NodesRead) -> None:
    await conn.send(
        m.NodesOk(
            id=req.id,
            node=svc.outbound.node,
            nodes=svc.outbound.directory.listing(),
            bridge=svc.outbound.info(),
        )
    )
