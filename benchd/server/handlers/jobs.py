"""Job handlers: job/report (`bench report`), a job's content owed to its correspondents.

A job itself starts with session/spawn (handlers/sessions.py) and settles when its
session exits (benchd.runtime.jobhost)."""

from bench_wire import messages as m


async def report(d, conn, caller, req: m.JobReport) -> None:
    n = await d.jobs.report(caller, req.content)
    await conn.send(m.ReportOk(id=req.id, session=caller.session.id, bytes=n))


HANDLERS = {m.JobReport: report}
