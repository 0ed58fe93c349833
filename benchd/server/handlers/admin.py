"""Handlers for the daemon itself: hello, stop, journal/ack, debug/fault."""

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd import __version__
from benchd.store import damage, faults


async def hello(d, conn, caller, req: m.Hello) -> None:
    await conn.send(
        m.HelloOk(
            id=req.id,
            version=__version__,
            protocol=m.PROTOCOL_VERSION,
            pid=d.pid,
            bench_dir=d.bench_dir,
            caller=caller.handle,
            caps=d.caps,
            reactor=d.reactor_info(),
            sessions=d.live_session_count(),
            mailboxes=d.index.mailbox_count(),
            index=m.IndexHealth(**d.index.health()),
            test_hooks=d.test_hooks,
            verbs=sorted(m.VERBS),
            node=d.outbound.node,
            bridge=d.outbound.info(),
            disk=d.disk_health(),
            journal_damage=d.damage,
        )
    )


async def journal_ack(d, conn, caller, req: m.JournalAck) -> None:
    try:
        damage.clear(d.bench_dir)
    except OSError as err:
        raise WireError("io-error", f"the damage report could not be removed: {err}") from None
    n, d.damage = len(d.damage), []
    d.log.info("journal damage acknowledged", reports=n)
    await conn.send(m.JournalAckOk(id=req.id, acknowledged=n))


async def stop(d, conn, caller, req: m.Stop) -> None:
    await conn.send(m.StopOk(id=req.id))
    d.request_stop()


async def debug_fault(d, conn, caller, req: m.DebugFault) -> None:
    if not d.test_hooks:
        raise WireError("forbidden", "fault injection needs a daemon started with --test-hooks")
    try:
        faults.arm(req.point, req.errno, req.count)
    except ValueError as err:
        raise WireError("bad-request", str(err)) from None
    await conn.send(m.FaultOk(id=req.id))


HANDLERS = {
    m.Hello: hello,
    m.Stop: stop,
    m.DebugFault: debug_fault,
    m.JournalAck: journal_ack,
}
