"""Handlers for the daemon itself: hello, stop, journal/ack, debug/fault, and its event
log (the events verb: the log from a sequence number, then, with follow, live events).
"""

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from bench_wire.messages import upgrade_event
from benchd import __version__
from benchd.core.authority import Caller
from benchd.runtime.hub import Record, Subscriber
from benchd.server.connection import Connection
from benchd.server.wiring import Services
from benchd.store.fileio import faults


async def hello(svc: Services, conn: Connection, caller: Caller, req: m.Hello) -> None:
    info = svc.info
    await conn.send(
        m.HelloOk(
            id=req.id,
            version=__version__,
            protocol=m.PROTOCOL_VERSION,
            pid=info.pid,
            bench_dir=info.bench_dir,
            caller=caller.handle,
            caps=info.caps,
            reactor=info.reactor,
            sessions=len(svc.roster.live),
            mailboxes=len(svc.index.handles()),
            index=svc.index.health(),
            test_hooks=info.test_hooks,
            verbs=sorted(m.VERBS),
            node=svc.outbound.node,
            bridge=svc.outbound.info(),
            disk=svc.disk_health(),
            journal_damage=svc.damage.found,
            last_seq=svc.eventlog.published_seq,
        )
    )


async def journal_ack(svc: Services, conn: Connection, caller: Caller, req: m.JournalAck) -> None:
    n = svc.damage.ack()
    await conn.send(m.JournalAckOk(id=req.id, acknowledged=n))


async def stop(svc: Services, conn: Connection, caller: Caller, req: m.Stop) -> None:
    await conn.send(m.StopOk(id=req.id))
    svc.request_stop()


async def debug_fault(svc: Services, conn: Connection, caller: Caller, req: m.DebugFault) -> None:
    if not svc.info.test_hooks:
        raise WireError("forbidden", "fault injection needs a daemon started with --test-hooks")
    try:
        faults.arm(req.point, req.errno, req.count)
    except ValueError as err:
        raise WireError("bad-request", str(err)) from None
    await conn.send(m.FaultOk(id=req.id))


async def events(svc: Services, conn: Connection, caller: Caller, req: m.EventsRead) -> None:
    """The log from `since`, then (follow) live events until the client goes away."""
    if req.kind is not None and not _known(req.kind):
        prefixes = sorted({k.split("/")[0] + "/" for k in m.EVENT_KINDS})
        raise WireError(
            "bad-request",
            f"unknown event kind {req.kind!r}: give a kind (mail/sent) or a kind prefix "
            f"ending in / ({', '.join(prefixes)})",
        )
    if req.limit is not None and req.limit < 1:
        raise WireError("bad-limit", "limit must be at least 1")
    follower = svc.hub.follow(req.kind) if req.follow else None
    if follower is not None:
        svc.hub.stream_started()
    try:
        last = req.since
        sent = 0
        for record in svc.eventlog.read_since(req.since, upto=svc.eventlog.published_seq):
            if req.kind is None or str(record.get("kind")).startswith(req.kind):
                # A job/settled of an earlier version in today's words (outcome_unknown).
                await conn.send(m.EventFrame(id=req.id, event=upgrade_event(record)))
                sent += 1
                if req.limit is not None and sent >= req.limit:
                    break
            last = record["seq"]
        if follower is None or (req.limit is not None and sent >= req.limit):
            await conn.send(m.EndFrame(id=req.id, reason="done"))
            return
        await _follow(conn, req, follower, last)
    finally:
        if follower is not None:
            follower.close()
            svc.hub.stream_ended()


async def _follow(
    conn: Connection, req: m.EventsRead, follower: Subscriber[Record], last: int
) -> None:
    async def stream() -> None:
        async for first in follower.receive:
            # Each receive is a pass of the scheduler, and the committer commits one
            # batch a pass: a follower that took one record a pass fell a batch's worth
            # of records behind at each (a job's page is 64), and overflowed. So what is
            # queued goes out at once (Connection.send yields now and then by itself).
            for record in _queued(follower, first):
                if record["seq"] > last:
                    await conn.send(m.EventFrame(id=req.id, event=record))
        if follower.overflowed:
            await conn.send_error(
                req.id, "slow-consumer", "the event stream was ended: the client fell behind"
            )
        else:
            await conn.send(m.EndFrame(id=req.id, reason="stopped"))

    # The client says nothing more on a follow stream; its leaving ends the stream.
    await conn.while_present(stream)


def _queued(follower: Subscriber[Record], first: Record) -> list[Record]:
    """`first` and the records queued behind it now, taken without a pass each."""
    records = [first]
    while True:
        try:
            records.append(follower.receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return records


def _known(kind: str) -> bool:
    """A kind, or a prefix of kinds ending in / (`job/`), as the dashboard's filter takes.
    No kind is a prefix of another, so matching by prefix keeps a whole kind exact."""
    if kind in m.EVENT_KINDS:
        return True
    return kind.endswith("/") and any(k.startswith(kind) for k in m.EVENT_KINDS)
