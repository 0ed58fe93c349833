"""Delivery states and waits: mail/sent-list, mail/status, mail/wait, job/wait.

Who sees what: a session sees the states of the mail it sent (another's is
`no-such-message`, as if absent); the operator sees every message's. A wait reads
mail only from the caller's own mailbox; a session waits only on its own jobs (and
theirs). A wait for a reply ends only on a reply from the message's recipient. A wait's client that leaves ends the wait: nothing is read for nobody.
"""

import msgspec
import trio

from bench_wire import messages as m
from bench_wire import outcomes
from bench_wire.config import seconds_text
from bench_wire.errors import WireError
from benchd.core import delivery
from benchd.core.authority import Caller
from benchd.core.jobs import JobRecord
from benchd.core.names import check_mail_id, format_ms
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services
from benchd.store import mailfile
from benchd.store.index import UNREAD

SENT_DEFAULT, SENT_MAX = 50, 500
SCAN_MAX = 500  # unread messages a new mail wait looks through for one already there


def _mark(mk: delivery.Mark) -> m.StateMark:
    x = mk.extra
    return m.StateMark(
        state=mk.state,
        at=format_ms(mk.at),
        reason=x.get("reason"),
        until=format_ms(int(x["until"])) if "until" in x else None,
        by=x.get("by"),
        reader=x.get("reader"),
        reply=x.get("reply"),
        node=x.get("node"),
    )


def _subject(svc: Services, rcpt: str | None, mail_id: str) -> str:
    """A sent message's subject, from its recipient's row in the index ("" when that is
    on another node, or gone)."""
    if not rcpt or "@" in rcpt:
        return ""
    row = svc.index.get(rcpt, mail_id)
    return row.subject if row is not None else ""


def _local(svc: Services, address: str) -> str:
    """`bob@<this node>` is `bob`; other addresses stay as they are."""
    name, _, node = address.partition("@")
    return name if node == svc.mail.node else address


async def mail_sent_list(
    svc: Services, conn: Connection, caller: Caller, req: m.MailSentList
) -> None:
    sender = caller.handle
    if req.sender is not None and _local(svc, req.sender) != caller.handle:
        if not caller.is_operator:
            raise WireError("forbidden", "a session sees only the states of mail it sent")
        sender = _local(svc, req.sender)
    if req.state is not None and req.state not in m.STATES:
        raise WireError("bad-request", f"state is one of {', '.join(m.STATES)}, not {req.state!r}")
    limit = SENT_DEFAULT if req.limit is None else req.limit
    if not 1 <= limit <= SENT_MAX:
        raise WireError("bad-limit", f"limit is between 1 and {SENT_MAX}")
    to = None if req.to is None else _local(svc, req.to)
    rows, more = svc.states.sent(sender, to, req.state, limit)
    out = [
        m.SentMail(
            mail_id=row.id,
            to=row.rcpt or "",
            date=format_ms(delivery.id_ms(row.id) or 0),
            state=mk.state,
            at=format_ms(mk.at),
            reason=mk.extra.get("reason"),
            subject=_subject(svc, row.rcpt, row.id),
        )
        for row, mk in rows
    ]
    await conn.send(m.SentListOk(id=req.id, sender=sender, messages=out, truncated=more))


async def mail_status(svc: Services, conn: Connection, caller: Caller, req: m.MailStatus) -> None:
    check_mail_id(req.mail_id)
    row = svc.states.get(req.mail_id)
    if row is None or (not caller.is_operator and row.sender != caller.handle):
        raise WireError("no-such-message", f"no message {req.mail_id} sent by {caller.handle}")
    marks = svc.states.marks(row)
    now = delivery.current(marks)
    await conn.send(
        m.StatusOk(
            id=req.id,
            mail_id=row.id,
            sender=row.sender or "",
            to=row.rcpt or "",
            state=now.state if now else "delivered",
            states=[_mark(x) for x in marks],
        )
    )


def _timeout(svc: Services, value: float) -> float:
    cap = svc.info.wait_max
    if not 0 < value <= cap:
        raise WireError(
            "bad-duration",
            f"a wait's timeout is more than 0 and at most {seconds_text(cap)} "
            f"(got {seconds_text(value)})",
        )
    return value


def _in_reply_to(path: str) -> str | None:
    data = mailfile.load(path)
    if data is None:
        return None
    try:
        return mailfile.read(path, data)[0].in_reply_to
    except WireError:
        return None


def _answers(in_reply_to: str | None, mail_id: str) -> bool:
    return in_reply_to is not None and (
        in_reply_to == mail_id or in_reply_to.startswith(mail_id + "@")
    )


async def mail_wait(svc: Services, conn: Connection, caller: Caller, req: m.MailWait) -> None:
    timeout = _timeout(svc, req.timeout)
    handle = caller.handle
    sender = None if req.sender is None else _local(svc, req.sender)
    parent = None if req.reply_to is None else svc.mail.reference(req.reply_to)
    # Only the message's recipient answers it: a reply is awaited from them, whoever
    # waits (its sender, or anyone it was told to reply to). A recipient waiting for a
    # reply to mail it received waits on itself: a cycle, refused below.
    replier = None if parent is None else svc.mail.recipient(handle, parent)
    if parent is not None and replier is None:
        raise WireError("no-such-message", f"no message {req.reply_to} is known here")
    replier = None if replier is None else _local(svc, replier)
    target = sender if sender is not None else replier
    waiter = svc.waits.open(handle, target)
    found: list[str] = []

    def matches(from_: str, in_reply_to: str | None) -> bool:
        if sender is not None and _local(svc, from_) != sender:
            return False
        if parent is None:
            return True
        return _local(svc, from_) == replier and _answers(in_reply_to, parent)

    async def wait() -> None:
        # Registered first, then the mail already there looked through: nothing that
        # arrives in between is missed.
        rows = svc.index.page(handle, UNREAD, None, SCAN_MAX)[:SCAN_MAX]
        links = svc.queries.parents(handle, [r.mail_id for r in rows]) if parent else {}
        for r in rows:
            if matches(r.sender, links.get(r.mail_id)):
                found.append(r.mail_id)
                return
        with trio.move_on_after(timeout):
            while True:
                ev = await waiter.next()
                assert isinstance(ev, m.MailSent), "a mail wait is offered mail"
                if matches(ev.sender, _in_reply_to(ev.path) if parent else None):
                    found.append(ev.mail_id)
                    return

    try:
        ending = await conn.while_present(wait)
    finally:
        svc.waits.close(waiter)
    if ending != "done":
        return  # the client left: nothing is read
    if not found:
        raise WireError("timeout", f"no matching mail arrived within {seconds_text(timeout)}")
    res = await svc.mailroom.read(handle, found[0], handle)
    await conn.send(m.WaitOk(**msgspec.structs.asdict(res) | {"id": req.id}))


async def job_wait(svc: Services, conn: Connection, caller: Caller, req: m.JobWait) -> None:
    timeout = _timeout(svc, req.timeout)
    s = svc.roster.lookup(req.session)
    if s is None:
        raise WireError("no-such-session", f"no session, live or exited, is called {req.session!r}")
    if svc.jobs.job(s.id) is None:
        raise WireError("no-job", f"session {s.handle} ({s.id}) is not a job")
    waiter = svc.waits.open(caller.handle, s.handle, job=s.id)
    settled: list[str] = []

    async def wait() -> None:
        with trio.move_on_after(timeout):
            while True:
                record = svc.jobs.job(s.id)
                if record is not None and record.outcome is not None:
                    # In today's words, whatever version stored it (outcome_unknown).
                    word, _ = outcomes.current(record.outcome)
                    settled.append(word or "interrupted")
                    return
                await waiter.next()

    try:
        ending = await conn.while_present(wait)
    finally:
        svc.waits.close(waiter)
    if ending != "done":
        return
    if not settled:
        raise WireError(
            "timeout", f"the job of {s.handle} did not settle within {seconds_text(timeout)}"
        )
    record = svc.jobs.job(s.id)
    content = record.content if record is not None else ""
    if not content:
        content = f"(no report: {s.handle} ended without one)"
    await conn.send(
        m.JobWaitOk(
            id=req.id,
            session=s.id,
            handle=s.handle,
            outcome=settled[0],
            reply=content,
            reason=s.reason,
            path=_reply_path(svc, s.handle, record, caller.handle),
        )
    )


def _reply_path(svc: Services, sender: str, record: JobRecord | None, waiter: str) -> str | None:
    """Where the job's reply to `waiter` lies in its mailbox (None: the waiter is owed
    none, or it is not delivered yet: a refused reply is retried later)."""
    if record is None:
        return None
    for reply in record.replies:
        if reply.to != waiter:
            continue
        hit = svc.index.find_key(sender, record.reply_key(reply))
        if hit is not None and hit.handle == waiter:
            return svc.mailroom.path(hit.handle, hit.mail_id, hit.state)
    return None


HANDLERS: Handlers = {
    m.MailSentList: mail_sent_list,
    m.MailStatus: mail_status,
    m.MailWait: mail_wait,
    m.JobWait: job_wait,
}
