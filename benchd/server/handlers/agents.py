"""Agent handlers: agent/report (`bench hook EVENT`, from a session's own agent) and
agent/answer (`bench approve|deny HANDLE`); see benchd.runtime.agenthost."""

from bench_wire import messages as m
from benchd.core.authority import Caller
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services


async def report(svc: Services, conn: Connection, caller: Caller, req: m.AgentReport) -> None:
    a = await svc.agents.report(caller, req.event, req.payload)
    await conn.send(m.AgentReportOk(id=req.id, state=a.state, output=a.output))


async def answer(svc: Services, conn: Connection, caller: Caller, req: m.AgentAnswer) -> None:
    s = svc.roster.find(req.handle)
    a = await svc.agents.answer(caller, s, req.allow, req.reason)
    await conn.send(
        m.AgentAnswerOk(id=req.id, session=a.session, handle=a.handle, tool=a.tool, via=a.via)
    )


HANDLERS: Handlers = {m.AgentReport: report, m.AgentAnswer: answer}
