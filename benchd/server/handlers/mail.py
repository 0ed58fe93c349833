"""Mail handlers: mail/send, mail/list, mail/read, the verbs over the search cache
(mail/search, mail/thread, mail/reply), and the delivery states and waits of sent mail
(mail/sent-list, mail/status, mail/wait, and job/wait, which waits on a job's reply).
Who sees what is docs/protocol.md's table; none of search, thread and reply retires
anything. A message may be named by its id here or by its identity across nodes
(`<id>@<node>`, benchd.core.names).
"""

import calendar
import time

import msgspec
import trio
from msgspec.structs import replace

from bench_wire import messages as m
from bench_wire.addresses import resolve, split_address
from bench_wire.config import seconds_text
from bench_wire.errors import WireError
from benchd.core import delivery
from benchd.core.authority import Caller
from benchd.core.jobs import JobRecord
from benchd.core.names import check_handle, check_mail_id, format_ms, id_ms, identity, is_handle
from benchd.runtime.mailroom import LIST_DEFAULT, LIST_MAX, SUBJECT_CHARS
from benchd.runtime.nodes import OUTBOUND
from benchd.server.connection import Connection
from benchd.server.wiring import Services
from benchd.store import mailfile, queries, search
from benchd.store.index import STATE_NAMES, UNREAD


def _size(body: str) -> int:
    return len(body.encode("utf-8", "surrogatepass"))  # the mailroom refuses bad text itself


async def mail_send(svc: Services, conn: Connection, caller: Caller, req: m.MailSend) -> None:
    limiter = svc.limiter
    limiter.recipients(caller.handle, len(req.reply_to or ()))
    # A mailbox here (`bob`, `bob@<this node>`), or one on a node the bridge has seen
    # (queued for it: benchd.runtime.outbound).
    handle, node = resolve(req.to, svc.mail.node, svc.outbound.directory.knows, "recipient")
    if node is None:
        if req.to != handle:
            req = replace(req, to=handle)
        limiter.mailbox(caller.handle, handle, _size(req.body))
    if req.in_reply_to is not None:
        req = replace(req, in_reply_to=svc.mail.reference(req.in_reply_to))
    spec = svc.mail.check(caller, req)  # before the charge: a bad request costs no token
    limiter.charge(caller, size=_size(req.body), to=() if node is not None else (handle,))
    res = await svc.mail.send(spec)
    if req.in_reply_to is not None:
        res = replace(res, not_a_reply=not_a_reply(svc, caller, req.in_reply_to))
    await conn.send(replace(res, id=req.id))


def not_a_reply(svc: Services, caller: Caller, parent: str) -> str | None:
    """Why mail whose in-reply-to names `parent` is no reply to it, or None: only the
    message's recipient answers it (anyone may write an in-reply-to)."""
    rcpt = svc.mail.recipient(caller.handle, parent)
    if rcpt == caller.handle:
        return None
    whose = f"its recipient ({rcpt})" if rcpt else "its recipient (unknown here)"
    return (
        f"{caller.handle} did not receive {parent}: this is delivered as mail, not as its "
        f"reply ({parent} is not marked replied; only {whose} answers it)"
    )


async def mail_list(svc: Services, conn: Connection, caller: Caller, req: m.MailList) -> None:
    # The caller's own mailbox by default (who may name which: benchd.core.authority);
    # the mailroom checks the handle.
    handle = caller.handle if req.handle is None else req.handle
    res = svc.mailroom.list(handle, req.state, req.limit, req.cursor)
    parents = svc.queries.parents(handle, [x.mail_id for x in res.messages])
    for x in res.messages:
        x.in_reply_to = parents.get(x.mail_id)
    await conn.send(replace(res, id=req.id))


async def mail_read(svc: Services, conn: Connection, caller: Caller, req: m.MailRead) -> None:
    handle = caller.handle if req.handle is None else req.handle
    res = await svc.mailroom.read(handle, req.mail_id, caller.handle)
    await conn.send(replace(res, id=req.id))


def _since(value: str | None) -> str | None:
    """An ISO-8601 UTC time, as the files' `date` (compared as text: they sort in time)."""
    if value is None:
        return None
    text = value[:-1] if value.endswith("Z") else value
    ms = 0
    if "." in text:
        text, frac = text.rsplit(".", 1)
        if not frac.isdigit():
            raise WireError("bad-since", f"{value!r} is not a UTC time like 2026-11-30T04:56:11Z")
        ms = int(frac[:3].ljust(3, "0"))
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            secs = calendar.timegm(time.strptime(text, fmt))
        except ValueError:
            continue
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"
    raise WireError("bad-since", f"{value!r} is not a UTC time like 2026-11-30T04:56:11Z")


async def mail_search(svc: Services, conn: Connection, caller: Caller, req: m.MailSearch) -> None:
    handle = req.handle
    if handle is not None:
        check_handle(handle)
    if not caller.is_operator:
        handle = caller.handle  # authority.check refused any other mailbox
    senders = None
    if req.sender is not None:
        # Mail from a handle here is `alice` in a mailbox and `alice@<this node>` in the
        # outbound queue: both spellings match.
        sender, node = split_address(req.sender, "from")
        own = svc.outbound.node
        senders = [req.sender] if node not in (None, own) else [sender, f"{sender}@{own}"]
    limit = LIST_DEFAULT if req.limit is None else req.limit
    if not 1 <= limit <= LIST_MAX:
        raise WireError("bad-limit", f"limit {limit} is outside 1-{LIST_MAX}")
    if len(req.query) > 1000:
        raise WireError("bad-query", "the query is longer than 1000 characters")
    try:
        rows = svc.queries.search(req.query, handle, senders, _since(req.since), limit)
    except search.BadQuery as err:
        raise WireError("bad-query", str(err)) from None
    hits = [
        m.SearchHit(
            mail_id=r.mail_id,
            handle=r.handle,
            sender=r.sender,
            subject=r.subject,
            date=r.date,
            state=STATE_NAMES[r.state],
            size=r.size,
            path=svc.mailroom.path(r.handle, r.mail_id, r.state),
            snippet=r.snippet,
            to=_recipient(svc, r.handle, r.mail_id),
        )
        for r in rows[:limit]
    ]
    await conn.send(m.SearchOk(id=req.id, hits=hits, truncated=len(rows) > limit))


def _recipient(svc: Services, handle: str, mail_id: str) -> str:
    """The recipient as addressed: the mailbox's handle, but for mail queued for another
    node the address its file names (read only for those)."""
    if handle != OUTBOUND:
        return handle
    stored = svc.mail.load(handle, mail_id)
    if stored is None:
        return handle
    return stored.meta.to


def _visible(svc: Services, caller: Caller, handle: str, sender: str) -> bool:
    # A session's own mail to another node is in the outbound queue, from its address.
    return (
        caller.is_operator
        or caller.handle in (handle, sender)
        or sender == f"{caller.handle}@{svc.outbound.node}"
    )


async def mail_thread(svc: Services, conn: Connection, caller: Caller, req: m.MailThread) -> None:
    mail_id = svc.mail.local_id(req.mail_id)
    cap = queries.THREAD_MAX if req.limit is None else req.limit
    if not 1 <= cap <= queries.THREAD_MAX:
        raise WireError("bad-limit", f"limit {cap} is outside 1-{queries.THREAD_MAX}")
    where = [r for r in svc.queries.locate(mail_id) if _visible(svc, caller, r.handle, r.sender)]
    if not where:
        raise WireError("no-such-message", f"no message {req.mail_id} that you can see")
    part = svc.queries.thread(mail_id, cap)
    out = []
    for link in part.links:
        if not _visible(svc, caller, link.handle, link.sender):
            continue
        stored = svc.mail.load(link.handle, link.mail_id)
        if stored is None:
            continue
        meta = stored.meta
        out.append(
            m.ThreadMessage(
                mail_id=link.mail_id,
                handle=link.handle,
                sender=link.sender,
                subject=meta.subject,
                date=meta.date,
                state=STATE_NAMES[stored.state],
                path=stored.path,
                body=stored.body,
                in_reply_to=link.in_reply_to,
                to=meta.to,  # the address, for mail queued for another node
                origin=identity(link.mail_id, meta.origin, svc.mail.node),
            )
        )
    left_out = None
    if part.cut:
        left_out = m.ThreadLeftOut(
            ancestors=part.ancestors_left,
            replies=part.replies_left,
            above=part.above,
            below=part.below,
        )
    await conn.send(
        m.ThreadOk(
            id=req.id,
            mail_id=req.mail_id,
            messages=out,
            truncated=part.cut,
            cap=cap,
            left_out=left_out,
        )
    )


def reply_subject(subject: str) -> str:
    """`Re: ` once, however deep the thread."""
    return subject if subject[:3].lower() == "re:" else ("Re: " + subject if subject else "Re:")


async def mail_reply(svc: Services, conn: Connection, caller: Caller, req: m.MailReply) -> None:
    mail_id = svc.mail.local_id(req.mail_id)
    where = svc.queries.locate(mail_id)
    # A session answers only mail it received; the operator any message.
    mailboxes = [r.handle for r in where if caller.is_operator or r.handle == caller.handle]
    if not mailboxes and not caller.is_operator and svc.index.get(caller.handle, mail_id):
        mailboxes = [caller.handle]  # not committed yet (the index is retrying)
    if not mailboxes:
        raise WireError("no-such-message", f"no message {req.mail_id} in your mailbox")
    stored = svc.mail.load(mailboxes[0], mail_id)
    if stored is None:
        raise WireError("no-such-message", f"message {req.mail_id} could not be read")
    meta = stored.meta
    # The replies name it by its identity: a copy from another node by its origin.
    parent = meta.origin or mail_id
    # Addresses: a sender or reply-to on another node is answered across the bridge.
    targets = list(dict.fromkeys(meta.reply_to or (meta.sender,)))
    # A message from before the reply-to limit may ask for more replies than it allows.
    svc.limiter.recipients(caller.handle, len(targets))
    for to in targets:
        if is_handle(to):  # not handle@node; a bad one fails below
            svc.limiter.mailbox(caller.handle, to, _size(req.body))
    subject = req.subject if req.subject is not None else reply_subject(meta.subject)
    if req.subject is None and len(subject) > SUBJECT_CHARS:
        subject = subject[:SUBJECT_CHARS]  # a long original subject plus "Re: " still fits
    # Checked before the charge: a bad request costs no token.
    specs = svc.mail.check_replies(caller, targets, req.body, subject, req.key, parent)
    local = [to for to in targets if is_handle(to)]
    svc.limiter.charge(caller, len(targets), _size(req.body) * len(targets), local)
    sent = await svc.mail.reply(specs)
    why = not_a_reply(svc, caller, parent)  # the operator answering another's mail
    if why is not None:
        sent = [replace(s, not_a_reply=why) for s in sent]
    await conn.send(
        m.ReplyOk(id=req.id, in_reply_to=parent, sent=[replace(s, id=req.id) for s in sent])
    )


# Delivery states and waits. A session sees the states of the mail it sent (another's is
# `no-such-message`, as if absent); a wait whose client leaves reads nothing.


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
            date=format_ms(id_ms(row.id) or 0),
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


WAIT_MAX = 3600.0  # the longest timeout a wait may ask for: one needing more waits again


def _timeout(value: float) -> float:
    if not 0 < value <= WAIT_MAX:
        raise WireError(
            "bad-duration",
            f"a wait's timeout is more than 0 and at most {seconds_text(WAIT_MAX)} "
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
    timeout = _timeout(req.timeout)
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
    timeout = _timeout(req.timeout)
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
                    word, _ = m.current_outcome(record.outcome)
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
