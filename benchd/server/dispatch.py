"""Verb handlers for the daemon's own verbs: hello, stop, mail/*, events, debug/fault.

A handler gets (daemon, connection, caller, request) and sends its answer(s) on the
connection; who may call it was checked before (benchd.core.authority). Session verbs live in benchd.runtime.sessions, job/report in benchd.runtime.jobhost.
"""

from collections.abc import Awaitable, Callable

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd import __version__
from benchd.core.names import check_handle
from benchd.store import faults, search


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


def _mailbox_for(caller, handle: str | None) -> str:
    """The mailbox named (default: the caller's own; who may name which: benchd.core.authority)."""
    if handle is None:
        return caller.handle
    check_handle(handle)
    return handle


async def mail_send(d, conn, caller, req: m.MailSend) -> None:
    if isinstance(req.to, str) and "@" in req.to:  # handle@node: benchd.runtime.outbound
        local = d.outbound.local_request(req)
        if local is None:
            await d.outbound.mail_send(conn, caller, req)
            return
        req = local
    if req.key is not None:
        from benchd.runtime.jobhost import check_client_key

        check_client_key(req.key)
    res = await d.mailroom.send(
        caller.handle, req.to, req.body, req.subject, req.key, req.reply_to, req.in_reply_to
    )
    await conn.send(m.SendOk(id=req.id, **res))


async def mail_list(d, conn, caller, req: m.MailList) -> None:
    handle = _mailbox_for(caller, req.handle)
    res = d.mailroom.list(handle, req.state, req.limit, req.cursor)
    parents = search.parents(d.index.w, handle, [x["mail_id"] for x in res["messages"]])
    res["messages"] = [
        m.MessageMeta(**x, in_reply_to=parents.get(x["mail_id"])) for x in res["messages"]
    ]
    await conn.send(m.ListOk(id=req.id, **res))


async def mail_read(d, conn, caller, req: m.MailRead) -> None:
    handle = _mailbox_for(caller, req.handle)
    res = await d.mailroom.read(handle, req.mail_id, caller.handle)
    await conn.send(m.ReadOk(id=req.id, **res))


async def events(d, conn, caller, req: m.EventsRead) -> None:
    """The log from `since`, then (follow) live events until the client goes away."""
    if req.kind is not None and req.kind not in m.EVENT_KINDS:
        raise WireError("bad-request", f"unknown event kind {req.kind!r}")
    if req.limit is not None and req.limit < 1:
        raise WireError("bad-limit", "limit must be at least 1")
    follower = d.hub.follow(req.kind) if req.follow else None
    d.hub.streams += follower is not None
    try:
        last = req.since
        sent = 0
        for record in d.eventlog.read_since(req.since, upto=d.eventlog.published_seq):
            if req.kind is None or record.get("kind") == req.kind:
                await conn.send(m.EventFrame(id=req.id, event=record))
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
            d.hub.streams -= 1


async def _follow(conn, req, follower, last: int) -> None:
    async def watch_client(cancel_scope):
        # The client says nothing more on a follow stream; EOF means it has gone.
        while await conn.next_line() is not None:
            pass
        cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_client, nursery.cancel_scope)
        async for record in follower.receive:
            if record["seq"] <= last:
                continue
            await conn.send(m.EventFrame(id=req.id, event=record))
        if follower.overflowed:
            await conn.send_error(
                req.id, "slow-consumer", "the event stream was ended: the client fell behind"
            )
        else:
            await conn.send(m.EndFrame(id=req.id, reason="stopped"))
        nursery.cancel_scope.cancel()


async def debug_fault(d, conn, caller, req: m.DebugFault) -> None:
    if not d.test_hooks:
        raise WireError("forbidden", "fault injection needs a daemon started with --test-hooks")
    try:
        faults.arm(req.point, req.errno, req.count)
    except ValueError as err:
        raise WireError("bad-request", str(err)) from None
    await conn.send(m.FaultOk(id=req.id))


HANDLERS: dict[type, Callable[..., Awaitable[None]]] = {
    m.Hello: hello,
    m.Stop: stop,
    m.MailSend: mail_send,
    m.MailList: mail_list,
    m.MailRead: mail_read,
    m.EventsRead: events,
    m.DebugFault: debug_fault,
}
