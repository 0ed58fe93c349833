"""Mail handlers: mail/send, mail/list, mail/read, and the verbs over the search cache
(mail/search, mail/thread, mail/reply).

Who sees what: a session searches only its own mailbox and sees, in a thread, only the
messages it received or sent; the operator sees every mailbox. A reply may be sent
by a session only to a message it received. None of search, thread and reply retires
anything.

Recipients and senders are addresses (`bob`, `bob@node2`), and a message may be named
by its id here or by its identity across nodes (`<id>@<node>`, benchd.core.mailrefs).
"""

import calendar
import time

from msgspec.structs import replace

from bench_wire import messages as m
from bench_wire.addresses import resolve, split_address
from bench_wire.errors import WireError
from benchd.core import mailrefs
from benchd.core.caller import Caller
from benchd.core.names import check_handle, is_handle
from benchd.runtime.mailroom import LIST_DEFAULT, LIST_MAX, SUBJECT_CHARS
from benchd.runtime.nodes import OUTBOUND
from benchd.server.connection import Connection
from benchd.server.services import Handlers, Services
from benchd.store import search, threads
from benchd.store.index import STATE_NAMES


def _mailbox_for(caller: Caller, handle: str | None) -> str:
    """The mailbox named (default: the caller's own; who may name which: benchd.core.authority)."""
    if handle is None:
        return caller.handle
    check_handle(handle)
    return handle


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
    handle = _mailbox_for(caller, req.handle)
    res = svc.mailroom.list(handle, req.state, req.limit, req.cursor)
    parents = svc.queries.parents(handle, [x.mail_id for x in res.messages])
    for x in res.messages:
        x.in_reply_to = parents.get(x.mail_id)
    await conn.send(replace(res, id=req.id))


async def mail_read(svc: Services, conn: Connection, caller: Caller, req: m.MailRead) -> None:
    handle = _mailbox_for(caller, req.handle)
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
    cap = threads.THREAD_MAX if req.limit is None else req.limit
    if not 1 <= cap <= threads.THREAD_MAX:
        raise WireError("bad-limit", f"limit {cap} is outside 1-{threads.THREAD_MAX}")
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
                origin=mailrefs.identity(link.mail_id, meta.origin, svc.mail.node),
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


HANDLERS: Handlers = {
    m.MailSend: mail_send,
    m.MailList: mail_list,
    m.MailRead: mail_read,
    m.MailSearch: mail_search,
    m.MailThread: mail_thread,
    m.MailReply: mail_reply,
}
