"""Handlers for the daemon itself: hello, stop, journal/ack, debug/fault."""

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd import __version__
from benchd.core.authority import Caller
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services
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
            sessions=svc.roster.live_count(),
            mailboxes=svc.index.mailbox_count(),
            index=m.IndexHealth(**svc.index.health()),
            test_hooks=info.test_hooks,
            verbs=sorted(m.VERBS),
            node=svc.outbound.node,
            bridge=svc.outbound.info(),
            disk=svc.disk_health(),
            journal_damage=svc.damage(),
            last_seq=svc.eventlog.published_seq,
        )
    )


async def journal_ack(svc: Services, conn: Connection, caller: Caller, req: m.JournalAck) -> None:
    n = svc.ack_damage()
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


HANDLERS: Handlers = {
    m.Hello: hello,
    m.Stop: stop,
    m.DebugFault: debug_fault,
    m.JournalAck: journal_ack,
}
