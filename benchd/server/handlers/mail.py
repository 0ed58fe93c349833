"""Mail handlers: mail/send, mail/list, mail/read, and the verbs over the search cache
(mail/search, mail/thread, mail/reply).

Who sees what: a session searches only its own mailbox and sees, in a thread, only the
messages it received or sent; the operator sees every mailbox. A reply may be sent
by a session only to a message it received. None of search, thread and reply retires
anything.
"""

import calendar
import time

from msgspec.structs import replace

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core import frontmatter, keys
from benchd.core.names import check_handle, check_mail_id, is_handle
from benchd.runtime.mailroom import LIST_DEFAULT, LIST_MAX, SUBJECT_CHARS
from benchd.store import search, threads
from benchd.store.index import READ, STATE_NAMES
from benchd.store.statedir import read_regular


def _mailbox_for(caller, handle: str | None) -> str:
    """The mailbox named (default: the caller's own; who may name which: benchd.core.authority)."""
    if handle is None:
        return caller.handle
    check_handle(handle)
    return handle


def _size(body: str) -> int:
    return len(body.encode("utf-8", "surrogatepass"))  # the mailroom refuses bad text itself


async def mail_send(d, conn, caller, req: m.MailSend) -> None:
    limiter = d.limiter
    limiter.recipients(caller.handle, len(req.reply_to or ()))
    if isinstance(req.to, str) and "@" in req.to:  # handle@node: benchd.runtime.outbound
        local = d.outbound.local_request(req)
        if local is None:
            limiter.charge(caller.handle, caller.is_operator)
            res = await d.outbound.queue(caller, req)
            await conn.send(replace(res, id=req.id))
            return
        req = local
    check_handle(req.to, "recipient")
    limiter.mailbox(caller.handle, req.to, _size(req.body))
    limiter.charge(caller.handle, caller.is_operator)
    if req.key is not None:
        keys.check_client_key(req.key)
    res = await d.mailroom.send(
        caller.handle, req.to, req.body, req.subject, req.key, req.reply_to, req.in_reply_to
    )
    await conn.send(replace(res, id=req.id))


async def mail_list(d, conn, caller, req: m.MailList) -> None:
    handle = _mailbox_for(caller, req.handle)
    res = d.mailroom.list(handle, req.state, req.limit, req.cursor)
    parents = search.parents(d.index.w, handle, [x.mail_id for x in res.messages])
    for x in res.messages:
        x.in_reply_to = parents.get(x.mail_id)
    await conn.send(replace(res, id=req.id))


async def mail_read(d, conn, caller, req: m.MailRead) -> None:
    handle = _mailbox_for(caller, req.handle)
    res = await d.mailroom.read(handle, req.mail_id, caller.handle)
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


async def mail_search(d, conn, caller, req: m.MailSearch) -> None:
    handle = req.handle
    if handle is not None:
        check_handle(handle)
    if not caller.is_operator:
        handle = caller.handle  # authority.check refused any other mailbox
    if req.sender is not None:
        check_handle(req.sender, "from")
    limit = LIST_DEFAULT if req.limit is None else req.limit
    if not 1 <= limit <= LIST_MAX:
        raise WireError("bad-limit", f"limit {limit} is outside 1-{LIST_MAX}")
    if len(req.query) > 1000:
        raise WireError("bad-query", "the query is longer than 1000 characters")
    try:
        rows = _query(
            d, lambda w: search.search(w, req.query, handle, req.sender, _since(req.since), limit)
        )
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
            path=d.mailroom.path(r.handle, r.mail_id, r.state),
            snippet=r.snippet,
        )
        for r in rows[:limit]
    ]
    await conn.send(m.SearchOk(id=req.id, hits=hits, truncated=len(rows) > limit))


def _query(d, fn):
    """A query of the search tables, which are written with the index's commits: commit
    what is pending first (when its backoff allows), so an answered send is found. A
    failed read is the index's to handle (set aside and rebuilt, like any read)."""
    index = d.index
    if index.pending.ops and index.due(0):
        index.flush()
    return index._read(lambda: fn(index.w))


def _visible(caller, handle: str, sender: str) -> bool:
    return caller.is_operator or caller.handle in (handle, sender)


def _load(d, handle: str, mail_id: str) -> tuple[dict, str, str, int] | None:
    row = d.index.get(handle, mail_id)
    if row is None:
        return None
    path = d.mailroom.path(handle, mail_id, row.state)
    try:
        meta, body = frontmatter.parse(read_regular(path))
    except FileNotFoundError:
        # Retired between the lookup and the open: it is in read/ now.
        path = d.mailroom.path(handle, mail_id, READ)
        try:
            meta, body = frontmatter.parse(read_regular(path))
        except (OSError, frontmatter.BadMailFile, UnicodeDecodeError):
            return None
    except (OSError, frontmatter.BadMailFile, UnicodeDecodeError):
        return None
    return meta, body.decode("utf-8", "replace"), path, row.state


async def mail_thread(d, conn, caller, req: m.MailThread) -> None:
    check_mail_id(req.mail_id)
    cap = threads.THREAD_MAX if req.limit is None else req.limit
    if not 1 <= cap <= threads.THREAD_MAX:
        raise WireError("bad-limit", f"limit {cap} is outside 1-{threads.THREAD_MAX}")
    where = [
        r
        for r in _query(d, lambda w: search.locate(w, req.mail_id))
        if _visible(caller, r.handle, r.sender)
    ]
    if not where:
        raise WireError("no-such-message", f"no message {req.mail_id} that you can see")
    part = _query(d, lambda w: threads.thread(w, req.mail_id, cap))
    out = []
    for link in part.links:
        if not _visible(caller, link.handle, link.sender):
            continue
        loaded = _load(d, link.handle, link.mail_id)
        if loaded is None:
            continue
        meta, body, path, state = loaded
        out.append(
            m.ThreadMessage(
                mail_id=link.mail_id,
                handle=link.handle,
                sender=link.sender,
                subject=meta.get("subject", ""),
                date=meta["date"],
                state=STATE_NAMES[state],
                path=path,
                body=body,
                in_reply_to=link.in_reply_to,
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


async def mail_reply(d, conn, caller, req: m.MailReply) -> None:
    check_mail_id(req.mail_id)
    where = _query(d, lambda w: search.locate(w, req.mail_id))
    # A session answers only mail it received; the operator any message.
    mailboxes = [r.handle for r in where if caller.is_operator or r.handle == caller.handle]
    if not mailboxes and not caller.is_operator and d.index.get(caller.handle, req.mail_id):
        mailboxes = [caller.handle]  # not committed yet (the index is retrying)
    if not mailboxes:
        raise WireError("no-such-message", f"no message {req.mail_id} in your mailbox")
    loaded = _load(d, mailboxes[0], req.mail_id)
    if loaded is None:
        raise WireError("no-such-message", f"message {req.mail_id} could not be read")
    meta = loaded[0]
    targets = list(dict.fromkeys(meta.get("reply-to") or [meta["from"]]))
    # A message from before the reply-to limit may ask for more replies than it allows.
    d.limiter.recipients(caller.handle, len(targets))
    for to in targets:
        if isinstance(to, str) and is_handle(to):  # not handle@node; a bad one fails below
            d.limiter.mailbox(caller.handle, to, _size(req.body))
    d.limiter.charge(caller.handle, caller.is_operator, len(targets))
    subject = req.subject if req.subject is not None else reply_subject(meta.get("subject", ""))
    if req.subject is None and len(subject) > SUBJECT_CHARS:
        subject = subject[:SUBJECT_CHARS]  # a long original subject plus "Re: " still fits
    if req.key is not None:
        keys.check_client_key(req.key)
    sent = []
    for to in targets:
        # With several recipients each send needs its own key (keys are per sender).
        key = req.key if req.key is None or len(targets) == 1 else keys.recipient_key(req.key, to)
        res = await d.mailroom.send(caller.handle, to, req.body, subject, key, [], req.mail_id)
        sent.append(replace(res, id=req.id))
    await conn.send(m.ReplyOk(id=req.id, in_reply_to=req.mail_id, sent=sent))


HANDLERS = {
    m.MailSend: mail_send,
    m.MailList: mail_list,
    m.MailRead: mail_read,
    m.MailSearch: mail_search,
    m.MailThread: mail_thread,
    m.MailReply: mail_reply,
}
