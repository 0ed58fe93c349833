"""Job handlers: job/report (`bench report`), a job's content owed to its correspondents.

A job itself starts with session/spawn (benchd.runtime.spawning) and settles when its
session exits (benchd.runtime.jobhost)."""

from bench_wire import messages as m
from benchd.core.authority import Caller
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services


async def report(svc: Services, conn: Connection, caller: Caller, req: m.JobReport) -> None:
    n = await svc.jobs.report(caller, req.content)
    assert caller.session is not None, "JobHost.report refuses the operator"
    await conn.send(m.ReportOk(id=req.id, session=caller.session.id, bytes=n))


HANDLERS: Handlers = {m.JobReport: report}
