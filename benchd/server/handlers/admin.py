"""Handlers for the daemon itself: hello, stop, debug/fault."""

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd import __version__
from benchd.store import faults


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
        )
    )


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
}
