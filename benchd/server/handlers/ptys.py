"""Session handlers: spawn, list, kill, prune, type, tail, attach, session/screen
(docs/protocol.md, "Streams"), and what a session's agent or job says of itself:
agent/report (`bench hook EVENT`), agent/answer (`bench approve|deny HANDLE`;
benchd.runtime.agenthost) and job/report (`bench report`).
"""

import base64

import trio
from msgspec.structs import replace

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.authority import Caller
from benchd.runtime.hub import Subscriber
from benchd.runtime.roster import Session
from benchd.runtime.sessions import OUTPUT_CHUNK
from benchd.runtime.terminal import check_size
from benchd.runtime.vt import frame, replay
from benchd.server.connection import Connection
from benchd.server.wiring import Services

FRAME_S = 0.1  # a spinner redrawn 60 times a second costs a watcher 10 frames, not 60
REPLAY_BYTES = 16384  # the newest output an attaching viewer is shown first


async def spawn(svc: Services, conn: Connection, caller: Caller, req: m.Spawn) -> None:
    res = await svc.spawner.spawn(caller, req)
    await conn.send(replace(res, id=req.id))


async def session_list(svc: Services, conn: Connection, caller: Caller, req: m.SessionList) -> None:
    ss = svc.roster
    rows = [s.info() for s in ss.exited] + [s.info() for s in ss.live.values()]
    await conn.send(m.SessionListOk(id=req.id, sessions=rows))


async def kill(svc: Services, conn: Connection, caller: Caller, req: m.SessionKill) -> None:
    s = svc.roster.find(req.handle)
    order = await svc.sessions.kill(s, caller.handle, req.cancel, req.tree)
    await conn.send(
        m.KillOk(id=req.id, session=s.id, handle=s.handle, ended=order if req.tree else [])
    )


async def prune(svc: Services, conn: Connection, caller: Caller, req: m.SessionPrune) -> None:
    forgotten = await svc.sessions.prune()
    await conn.send(m.PruneOk(id=req.id, forgotten=forgotten))


async def type_text(svc: Services, conn: Connection, caller: Caller, req: m.SessionType) -> None:
    s = svc.roster.find(req.handle)
    data = req.text.encode("utf-8", "surrogateescape")
    if req.enter:
        data += b"\r"
    await s.type_input(data)
    await conn.send(m.TypeOk(id=req.id, session=s.id, bytes=len(data)))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def last_lines(data: bytes, n: int) -> bytes:
    """The last `n` lines of a terminal's output (a line ends at \\n; an unended last
    line counts as one), as `tail -n` gives them."""
    if n == 0:
        return b""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    at = end
    for _ in range(n):
        at = data.rfind(b"\n", 0, at)
        if at < 0:
            return data
    return data[at + 1 :]


async def tail(svc: Services, conn: Connection, caller: Caller, req: m.SessionTail) -> None:
    if req.lines is not None and req.lines < 0:
        raise WireError("bad-limit", f"lines is 0 or more, not {req.lines}")
    s = svc.roster.find(req.handle, live_only=False)
    term = s.term
    assert term is not None, "Roster.find answers only sessions whose process started"
    if req.screen:
        lines, row, col = await term.render()
        if req.lines is not None:
            while lines and not lines[-1].strip():  # the blank rows below the last line
                lines = lines[:-1]
            lines = lines[max(0, len(lines) - req.lines) :]
        await conn.send(
            m.ScreenFrame(
                id=req.id, lines=[ln.rstrip() for ln in lines], cursor_row=row, cursor_col=col
            )
        )
        await conn.send(m.EndFrame(id=req.id))
        return
    # Only a live session has followers (a past one's terminal is its kept output only).
    live = s if req.follow and isinstance(s, Session) and s.live else None
    follower = live.term.followers.subscribe(1024) if live and live.term else None
    try:
        sb = bytes(term.scrollback)
        if req.lines is not None:
            sb = last_lines(sb, req.lines)
        for i in range(0, len(sb), OUTPUT_CHUNK):
            await conn.send(m.OutputFrame(id=req.id, data=_b64(sb[i : i + OUTPUT_CHUNK])))
        if not (req.follow and s.live):
            await conn.send(
                m.EndFrame(id=req.id, reason="done" if s.live else "exited", exit=s.exit)
            )
            return
        assert follower is not None and live is not None, "following a live session"
        await _pump(conn, req.id, live, follower, inputs=False)
    finally:
        if follower is not None:
            follower.close()


async def _pump(
    conn: Connection, rid: m.Id, s: Session, follower: Subscriber[bytes], inputs: bool
) -> None:
    """Output frames to the client until the session ends or the client leaves/detaches."""
    fell_behind = False

    async def stream() -> None:
        nonlocal fell_behind
        async for data in follower.receive:
            await conn.send(m.OutputFrame(id=rid, data=_b64(data)))
        fell_behind = s.live  # dropped for falling behind (follower.overflowed)

    async def from_client(req: m.Request) -> bool:
        if not inputs:
            return False
        if isinstance(req, m.SessionInput):
            try:
                data = base64.b64decode(req.data, validate=True)
            except ValueError:
                await conn.send_error(req.id, "bad-request", "input data is not base64")
                return False
            await s.type_input(data)
        elif isinstance(req, m.SessionResize):
            try:
                size = check_size(req.rows, req.cols, cap=True)
            except WireError:
                return False  # a window of no size: ignored, as it always was
            if s.term is not None:
                await s.term.resize(*size)
        elif isinstance(req, m.SessionDetach):
            return True
        else:
            await conn.send_error(
                req.id, "bad-request", "only input, resize and detach are valid while attached"
            )
        return False

    ending = await conn.while_present(stream, from_client)
    if ending == "gone":
        return
    reason = "detached" if ending == "stopped" else "slow-consumer" if fell_behind else "exited"
    await conn.send(m.EndFrame(id=rid, reason=reason, exit=s.exit))


async def attach(svc: Services, conn: Connection, caller: Caller, req: m.SessionAttach) -> None:
    s = svc.roster.find(req.handle)
    term = s.term
    assert term is not None, "Roster.find answers only sessions whose process started"
    follower = term.followers.subscribe(4096)
    # What came before the follower, at the size it was written for (no await between:
    # every byte is in exactly one of the two).
    recent = bytes(term.scrollback[-REPLAY_BYTES:])
    cut = len(term.scrollback) > len(recent)
    written_at = (term.rows, term.cols)
    async with s.viewed():  # counted as attached; its own size back when the last leaves
        try:
            size = check_size(req.rows, req.cols, cap=True) if req.rows and req.cols else None
            viewer_cols = size[1] if size else written_at[1]
            picture = (
                await trio.to_thread.run_sync(replay, recent, *written_at, viewer_cols, cut)
                if recent
                else b""
            )
            if size is not None:
                await term.resize(*size)
            await conn.send(
                m.AttachOk(id=req.id, session=s.id, handle=s.handle, rows=term.rows, cols=term.cols)
            )
            if picture:
                await conn.send(m.OutputFrame(id=req.id, data=_b64(picture)))
            await _pump(conn, req.id, s, follower, inputs=True)
        finally:
            follower.close()


async def not_attached(
    svc: Services,
    conn: Connection,
    caller: Caller,
    req: m.SessionInput | m.SessionResize | m.SessionDetach,
) -> None:
    raise WireError("bad-request", "input, resize and detach need an attached session first")


async def session_screen(
    svc: Services, conn: Connection, caller: Caller, req: m.SessionScreen
) -> None:
    s = svc.roster.find(req.handle, live_only=False)
    term = s.term
    assert term is not None, "Roster.find answers only sessions whose process started"
    # Only a live session's screen changes (a past one's is its kept output).
    live = s.term if req.follow and isinstance(s, Session) and s.live else None
    # Taken before each render: output that arrives while a frame is rendered or sent
    # sets this event, so it is drawn next (taken after, it would wait for more output).
    changed = live.changed if live is not None else trio.Event()
    last = await frame(req.id, term)
    await conn.send(last)
    if live is None:
        await conn.send(m.EndFrame(id=req.id, reason="done" if s.live else "exited", exit=s.exit))
        return
    term = live

    async def stream() -> None:
        nonlocal last, changed
        while s.live and not term.eof:
            await changed.wait()
            await trio.sleep(FRAME_S)  # let a burst of output settle into one frame
            changed = term.changed
            now = await frame(req.id, term)
            if (
                now.lines != last.lines
                or now.styles != last.styles
                or (now.cursor_row, now.cursor_col) != (last.cursor_row, last.cursor_col)
            ):
                await conn.send(now)
                last = now

    # Nothing more is said on a follow stream: the client's leaving ends it.
    if await conn.while_present(stream) != "gone":
        await conn.send(m.EndFrame(id=req.id, reason="exited", exit=s.exit))


async def agent_report(svc: Services, conn: Connection, caller: Caller, req: m.AgentReport) -> None:
    a = await svc.agents.report(caller, req.event, req.payload)
    await conn.send(m.AgentReportOk(id=req.id, state=a.state, output=a.output))


async def answer(svc: Services, conn: Connection, caller: Caller, req: m.AgentAnswer) -> None:
    s = svc.roster.find(req.handle)
    a = await svc.agents.answer(caller, s, req.allow, req.reason)
    await conn.send(
        m.AgentAnswerOk(id=req.id, session=a.session, handle=a.handle, tool=a.tool, via=a.via)
    )


async def job_report(svc: Services, conn: Connection, caller: Caller, req: m.JobReport) -> None:
    n = await svc.jobs.report(caller, req.content)
    assert caller.session is not None, "JobHost.report refuses the operator"
    await conn.send(m.ReportOk(id=req.id, session=caller.session.id, bytes=n))
