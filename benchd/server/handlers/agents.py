"""What a session's agent says of itself: agent/report (`bench hook EVENT`, from a
session's own agent), agent/answer (`bench approve|deny HANDLE`; see
benchd.runtime.agenthost), and job/report (`bench report`, a job's content owed to its
correspondents)."""

from bench_wire import messages as m
from benchd.core.authority import Caller
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services


async def agent_report(svc: Services, conn: Connection, caller: Caller, req: m.AgentReport) -> None:
    a = await svc.agents.report(caller, req.event, req.payload)
    await conn.send(m.AgentReportOk(id=req.id, state=a.state, output=a.output))


async def answer(svc: Services, conn: Connection, caller: Caller, req: m.AgentAnswer) -> None:
    s = svc.roster.find(req.handle)
    a = await svc.agents.answer(caller, s, req.allow, req.reason)
    await conn.send(
        m.AgentAnswerOk(id=req.id, session=a.session, handle=a.handle, tool=a.tool, via=a.via)
    )


# Job handlers: job/report (`bench report`), a job's content owed to its correspondents.
#
# A job itself starts with session/spawn (benchd.runtime.spawning) and settles when its
# session exits (benchd.runtime.jobhost).


async def job_report(svc: Services, conn: Connection, caller: Caller, req: m.JobReport) -> None:
    n = await svc.jobs.report(caller, req.content)
    assert caller.session is not None, "JobHost.report refuses the operator"
    await conn.send(m.ReportOk(id=req.id, session=caller.session.id, bytes=n))


HANDLERS: Handlers = {
    m.AgentReport: agent_report,
    m.AgentAnswer: answer,
    m.JobReport: job_report,
}
