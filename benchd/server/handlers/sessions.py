"""Session handlers: spawn, list, kill, prune, type, tail, attach, and session/screen.

session/screen: the first frame is the screen now; with `follow`, a new frame follows
each change, at most one per FRAME_S (a TUI redrawing a spinner 60 times a second costs
the watcher ten frames a second, not sixty), and only when the rendered screen differs
from the last frame sent. The stream ends when the session exits or the client goes
away.
"""

import base64

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.runtime.broadcast import Subscriber
from benchd.runtime.committer import EventOp
from benchd.runtime.replay import replay
from benchd.runtime.screens import frame
from benchd.runtime.sessions import OUTPUT_CHUNK, Session
from benchd.runtime.terminal import check_size

FRAME_S = 0.1
REPLAY_BYTES = 16384  # the newest output an attaching viewer is shown first


async def spawn(d, conn, caller, req: m.Spawn) -> None:
    jobs, sessions, delegation = d.jobs, d.sessions, d.delegation
    parent = caller.session  # None: the operator's spawn; else a delegation
    if parent is not None:
        req = await delegation.prepare(caller, req)
    if req.job is not None:
        d.limiter.recipients(caller.handle, len(req.job.reply_to))  # a reply goes to each
        jobs.check_spec(req.job, caller)
    s = sessions.reserve(req)
    if parent is not None:
        delegation.started(parent, s)  # no await since prepare: the limits still hold
    mail_id = None
    if req.job is not None:
        # The task is in the child's inbox before the child runs (it may read at once).
        try:
            jobs.begin(s, req.job, caller)
            mail_id = await jobs.deliver_task(s, req.job, caller)
        except BaseException:
            sessions._forget(s)
            delegation.settled(s)
            if s.job is not None:
                jobs.abandon(s)  # never started, never told anyone: owes nothing
            raise
    try:
        sessions.launch(s)
    except WireError:
        if s.job is not None:
            s.exited_with(127, None)
            s.outcome = await jobs.settle(s)  # the job was promised a reply: it failed to start
        delegation.settled(s)
        raise
    events: list[m.Event] = [
        m.SessionSpawned(
            session=s.id,
            handle=s.handle,
            pid=s.term.pid,
            argv=s.argv,
            job=s.job is not None,
        )
    ]
    if parent is not None:
        events.append(delegation.delegated(s))
    try:
        await d.committer.submit(EventOp(*events))
    except WireError:
        # Refused means nothing happened: end the child and close its job quietly.
        s.cancelled = True
        await sessions.end(s, grace=0.5)
        raise
    await conn.send(
        m.SpawnOk(id=req.id, session=s.id, handle=s.handle, pid=s.term.pid, mail_id=mail_id)
    )


async def session_list(d, conn, caller, req: m.SessionList) -> None:
    ss = d.roster
    rows = [s.info() for s in ss.exited] + [s.info() for s in ss.live.values()]
    await conn.send(m.SessionListOk(id=req.id, sessions=rows))


async def kill(d, conn, caller, req: m.SessionKill) -> None:
    s = d.roster.find(req.handle)
    order = []
    if req.tree:
        # Children first, a level at a time: each child's job settles (and replies to
        # its parent) while the parent is still there to be woken by it.
        below = d.roster.descendants(s.id)
        for depth in sorted({len(c.lineage) for c in below}, reverse=True):
            level = [c for c in below if len(c.lineage) == depth]
            async with trio.open_nursery() as nursery:
                for c in level:
                    _mark(c, caller, req.cancel)
                    nursery.start_soon(d.sessions.end, c)
            order += [c.id for c in level]
    _mark(s, caller, req.cancel)
    order.append(s.id)
    await d.sessions.end(s)
    await conn.send(
        m.KillOk(id=req.id, session=s.id, handle=s.handle, ended=order if req.tree else [])
    )


def _mark(s: Session, caller, cancel: bool) -> None:
    s.cancelled = s.cancelled or cancel
    if s.killed_by is None:
        s.killed_by = caller.handle


async def prune(d, conn, caller, req: m.SessionPrune) -> None:
    n = len(d.roster.exited)
    d.roster.exited.clear()  # their mailboxes and events stay
    if d.sessions.exited_store is not None:
        await trio.to_thread.run_sync(d.sessions.exited_store.prune)
    await conn.send(m.PruneOk(id=req.id, forgotten=n))


async def type_text(d, conn, caller, req: m.SessionType) -> None:
    s = d.roster.find(req.handle)
    data = req.text.encode("utf-8", "surrogateescape")
    if req.enter:
        data += b"\r"
    await s.type_input(data)
    await conn.send(m.TypeOk(id=req.id, session=s.id, bytes=len(data)))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def tail(d, conn, caller, req: m.SessionTail) -> None:
    s = d.roster.find(req.handle, live_only=False)
    if req.screen:
        lines, row, col = await s.term.render()
        await conn.send(
            m.ScreenFrame(
                id=req.id, lines=[ln.rstrip() for ln in lines], cursor_row=row, cursor_col=col
            )
        )
        await conn.send(m.EndFrame(id=req.id))
        return
    follower = s.term.followers.subscribe(1024) if req.follow and s.live else None
    try:
        sb = bytes(s.term.scrollback)
        for i in range(0, len(sb), OUTPUT_CHUNK):
            await conn.send(m.OutputFrame(id=req.id, data=_b64(sb[i : i + OUTPUT_CHUNK])))
        if not (req.follow and s.live):
            await conn.send(
                m.EndFrame(id=req.id, reason="done" if s.live else "exited", exit=s.exit)
            )
            return
        assert follower is not None, "following a live session"
        await _pump(conn, req.id, s, follower, inputs=False)
    finally:
        if follower is not None:
            follower.close()


async def _pump(conn, rid, s: Session, follower: Subscriber[bytes], inputs: bool) -> None:
    """Output frames to the client until the session ends or the client leaves/detaches."""
    reason = ["exited"]

    async def from_client(scope):
        while True:
            req = await conn.next_request()
            if req is None:
                reason[0] = "gone"
                break
            if not inputs:
                continue
            if isinstance(req, m.SessionInput):
                try:
                    data = base64.b64decode(req.data, validate=True)
                except ValueError:
                    await conn.send_error(req.id, "bad-request", "input data is not base64")
                    continue
                await s.type_input(data)
            elif isinstance(req, m.SessionResize):
                try:
                    size = check_size(req.rows, req.cols, cap=True)
                except WireError:
                    continue  # a window of no size: ignored, as it always was
                if s.term is not None:
                    await s.term.resize(*size)
            elif isinstance(req, m.SessionDetach):
                reason[0] = "detached"
                break
            else:
                await conn.send_error(
                    req.id, "bad-request", "only input, resize and detach are valid while attached"
                )
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(from_client, nursery.cancel_scope)
        async for data in follower.receive:
            await conn.send(m.OutputFrame(id=rid, data=_b64(data)))
        if reason[0] == "exited" and s.live:
            reason[0] = "slow-consumer"  # dropped for falling behind (follower.overflowed)
        nursery.cancel_scope.cancel()
    if reason[0] != "gone":
        await conn.send(m.EndFrame(id=rid, reason=reason[0], exit=s.exit))


async def attach(d, conn, caller, req: m.SessionAttach) -> None:
    s = d.roster.find(req.handle)
    term = s.term
    follower = term.followers.subscribe(4096)
    # What came before the follower, at the size it was written for (no await between:
    # every byte is in exactly one of the two).
    recent = bytes(term.scrollback[-REPLAY_BYTES:])
    cut = len(term.scrollback) > len(recent)
    written_at = (term.rows, term.cols)
    s.attached += 1
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
        s.attached -= 1
        # The last client left: the session goes back to its own size (the next client
        # to attach sets its own).
        if s.attached == 0 and s.live and (s.term.rows, s.term.cols) != s.size:
            with trio.CancelScope(shield=True):  # also when the client's stream was cut
                await s.term.resize(*s.size)


async def not_attached(d, conn, caller, req) -> None:
    raise WireError("bad-request", "input, resize and detach need an attached session first")


async def session_screen(d, conn, caller, req: m.SessionScreen) -> None:
    s = d.roster.find(req.handle, live_only=False)
    term = s.term
    last = await frame(req.id, term)
    await conn.send(last)
    if not req.follow or not s.live:
        await conn.send(m.EndFrame(id=req.id, reason="done" if s.live else "exited", exit=s.exit))
        return
    gone = False

    async def watch_client(scope):
        nonlocal gone
        while await conn.next_line() is not None:
            pass  # nothing more is said on a follow stream; EOF means the client left
        gone = True
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_client, nursery.cancel_scope)
        while s.live and not term.eof:
            changed = term.changed
            await changed.wait()
            await trio.sleep(FRAME_S)  # let a burst of output settle into one frame
            now = await frame(req.id, term)
            if (
                now.lines != last.lines
                or now.styles != last.styles
                or (now.cursor_row, now.cursor_col) != (last.cursor_row, last.cursor_col)
            ):
                await conn.send(now)
                last = now
        nursery.cancel_scope.cancel()
    if not gone:
        await conn.send(m.EndFrame(id=req.id, reason="exited", exit=s.exit))


HANDLERS = {
    m.Spawn: spawn,
    m.SessionList: session_list,
    m.SessionKill: kill,
    m.SessionPrune: prune,
    m.SessionType: type_text,
    m.SessionTail: tail,
    m.SessionAttach: attach,
    m.SessionInput: not_attached,
    m.SessionResize: not_attached,
    m.SessionDetach: not_attached,
    m.SessionScreen: session_screen,
}
