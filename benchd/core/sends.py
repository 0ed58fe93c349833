"""What a durable mail operation does, as frozen values (one kind per operation), and
what each kind writes and logs (pure). A send is checked once (`Mailroom.check_send`),
then is a value nothing changes; the committer's op (`SendOp`, `RetireOp`) runs it.
"""

from typing import Self

import msgspec

from bench_wire import messages as m
from benchd.core.frontmatter import FrontMatter


class Send(msgspec.Struct, frozen=True, kw_only=True):
    """Local mail from `sender` to the mailbox `to`, checked."""

    sender: str
    to: str  # the mailbox it lands in
    subject: str
    body: bytes
    key: str | None  # the caller's; None: the op makes `auto-<id>`
    reply_to: tuple[str, ...] = ()
    in_reply_to: str | None = None
    live: bool = False  # `to` has a live session (its mail wakes it)
    outbox_reply: bool = False  # a job's reply: outbox/posted in the same commit

    @property
    def capped(self) -> bool:
        """Whether the mailbox's unread caps apply (the outbound queue's: the far node's)."""
        return True

    @property
    def address(self) -> str:
        """Who the message is to, as its front matter and outbox/posted say."""
        return self.to


class Deliver(Send, frozen=True, kw_only=True):
    """Mail received from node `origin_node`, where its id is `origin_id`."""

    origin_node: str
    origin_id: str
    # bridge/bounced on the sender's node, when the message is a bounce coming home.
    bounced: m.BridgeBounced | None = None

    @classmethod
    def of(
        cls,
        send: Send,
        *,
        reply_to: tuple[str, ...],
        origin_node: str,
        origin_id: str,
        bounced: m.BridgeBounced | None,
    ) -> Self:
        """A send checked as local mail, received from another node."""
        fields = msgspec.structs.asdict(send)
        fields.update(reply_to=reply_to)
        return cls(**fields, origin_node=origin_node, origin_id=origin_id, bounced=bounced)


class Queue(Send, frozen=True, kw_only=True):
    """Mail for `address` on another node, in the outbound queue's mailbox `to`."""

    queued_for: str  # handle@node
    nonce: str  # its dedup id on the far side

    @classmethod
    def of(
        cls, send: Send, *, mailbox: str, address: str, reply_to: tuple[str, ...], nonce: str
    ) -> Self:
        """A send checked as one to the handle, pointed at the outbound queue."""
        fields = msgspec.structs.asdict(send)
        fields.update(to=mailbox, reply_to=reply_to, live=False)
        return cls(**fields, queued_for=address, nonce=nonce)

    @property
    def capped(self) -> bool:
        return False

    @property
    def address(self) -> str:
        return self.queued_for


class Bounce(Queue, frozen=True, kw_only=True):
    """A bounce into the outbound queue; `returned` is logged with it."""

    returned: m.BridgeBounced

    @classmethod
    def returning(cls, queued: Queue, returned: m.BridgeBounced) -> "Bounce":
        return cls(**msgspec.structs.asdict(queued), returned=returned)


def front_matter(spec: Send, mail_id: str, key: str, date: str) -> FrontMatter:
    """The file's front matter for a send given its id."""
    origin = f"{spec.origin_id}@{spec.origin_node}" if isinstance(spec, Deliver) else None
    return FrontMatter(
        id=mail_id,
        sender=spec.sender,
        to=spec.address,
        subject=spec.subject,
        date=date,
        key=key,
        reply_to=spec.reply_to,
        in_reply_to=spec.in_reply_to,
        origin=origin,
        nonce=spec.nonce if isinstance(spec, Queue) else None,
    )


def sent_events(spec: Send, meta: FrontMatter, path: str) -> list[m.Event]:
    """What a committed send logs (its front matter `meta`, its file at `path`)."""
    events: list[m.Event]
    match spec:
        case Bounce():
            events = [_queued(spec, meta, path), spec.returned]
        case Queue():
            events = [_queued(spec, meta, path)]
        case Deliver():
            events = [
                _sent(spec, meta, path),
                m.BridgeDelivered(
                    mail_id=meta.id,
                    sender=spec.sender,
                    to=spec.to,
                    key=spec.key or "",  # always given: the sender's key
                    origin=spec.origin_node,
                    origin_id=spec.origin_id,
                ),
            ]
            if spec.bounced is not None:
                events.append(spec.bounced)
        case _:
            events = [_sent(spec, meta, path)]
    if spec.outbox_reply:
        assert spec.key is not None, "a job's reply is keyed by its outbox row"
        events.append(m.OutboxPosted(key=spec.key, to=spec.address, mail_id=meta.id))
    return events


def _sent(spec: Send, meta: FrontMatter, path: str) -> m.Event:
    return m.MailSent(
        mail_id=meta.id, sender=spec.sender, to=spec.to, path=path, key=meta.key, live=spec.live
    )


def _queued(spec: Queue, meta: FrontMatter, path: str) -> m.Event:
    return m.BridgeQueued(mail_id=meta.id, sender=spec.sender, to=meta.to, key=meta.key, path=path)


class Retire(msgspec.Struct, frozen=True):
    """Move a message of `handle`'s from inbox/ to read/; mail/read by `reader` when
    `event` (a wake's retirement logs nothing of its own)."""

    handle: str
    mail_id: str
    reader: str = ""
    event: bool = False


class Forward(Retire, frozen=True, kw_only=True):
    """Mark a queued message forwarded (inbox/ -> read/ of the outbound queue)."""

    key: str
    to: str  # the address it was sent to ("" when its file could not be read)


class WakeRetire(Retire, frozen=True, kw_only=True):
    """A wake's retirement: the move and its `agent/woken` are one commit, so no
    interleaving with a kill, an exit or a stop leaves a retired message unwoken."""

    session: str
    sender: str
    door: str | None = None  # the agent's own hook took it (benchd.runtime.agenthost)


def retired_events(spec: Retire, dst: str) -> list[m.Event]:
    """What a retirement that moved its file to `dst` logs."""
    match spec:
        case WakeRetire():
            return [
                m.AgentWoken(
                    session=spec.session,
                    handle=spec.handle,
                    mail_id=spec.mail_id,
                    path=dst,
                    sender=spec.sender,
                    door=spec.door,
                )
            ]
        case Forward():
            return [m.BridgeForwarded(mail_id=spec.mail_id, to=spec.to, key=spec.key)]
        case Retire(event=True):
            return [
                m.MailReadEvent(
                    mail_id=spec.mail_id, handle=spec.handle, reader=spec.reader, path=dst
                )
            ]
        case _:
            return []
