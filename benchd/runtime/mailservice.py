"""Mail as the handlers ask for it: a send to any address, a message named by id or by
its identity across nodes, a stored message read back, and a reply's fan-out.
"""

from dataclasses import dataclass

from bench_wire import messages as m
from bench_wire.addresses import resolve
from bench_wire.errors import WireError
from benchd.core import keys
from benchd.core.authority import Caller
from benchd.core.frontmatter import FrontMatter
from benchd.core.names import check_ref, local_ref
from benchd.core.sends import Queue, Send
from benchd.runtime.mailroom import Mailroom
from benchd.runtime.outbound import Outbound
from benchd.store.index import Index
from benchd.store.queries import MailQueries


@dataclass(frozen=True, slots=True)
class StoredMail:
    """A message read back from its file, the path it was read from, and its state."""

    meta: FrontMatter
    body: str
    path: str
    state: int


class MailService:
    def __init__(
        self, mailroom: Mailroom, outbound: Outbound, index: Index, queries: MailQueries
    ) -> None:
        self.mailroom = mailroom
        self.outbound = outbound
        self.index = index
        self.queries = queries

    @property
    def node(self) -> str:
        return self.outbound.node

    def check(self, caller: Caller, req: m.MailSend, *, client_key: bool = True) -> Send:
        """A send to an address, checked (Mailroom.check_send): local mail, or a `Queue`
        for another node. Nothing is charged yet, so a bad request costs no token."""
        handle, node = resolve(req.to, self.node, None, "recipient")
        check = self.mailroom.check_send if node is None else self.outbound.queue_spec
        to = handle if node is None else req.to
        return check(
            caller.handle,
            to,
            req.body,
            req.subject,
            req.key,
            req.reply_to,
            req.in_reply_to,
            client_key=client_key,
        )

    async def send(self, spec: Send) -> m.SendOk:
        if isinstance(spec, Queue):
            return await self.outbound.send(spec)
        return await self.mailroom.send(spec)

    def reference(self, ref: str) -> str:
        """The message an in-reply-to names, as this node writes it: by its identity, so a
        copy received from another node is named by its origin (benchd.core.names)."""
        ref = local_ref(check_ref(ref), self.node)
        if "@" in ref:
            return ref
        return self.queries.origin_of(ref) or ref

    def recipient(self, handle: str, ref: str) -> str | None:
        """Whose reply answers the message `ref` names (as `reference` writes it): its
        recipient, or `handle` itself when it holds a copy; None: not known here. Only
        that recipient's reply makes a message `replied` (docs/cli.md)."""
        ids = [ref] if "@" not in ref else self.queries.named(ref)
        rcpts: list[str] = []
        for mail_id in ids:
            if self.index.get(handle, mail_id) is not None:
                return handle
            row = self.index.get_state(mail_id)
            if row is not None and row.rcpt:
                rcpts.append(row.rcpt)
        return rcpts[0] if rcpts else None

    def local_id(self, ref: object) -> str:
        """The id here of a message named by its id or by its identity across nodes; a
        reference to a message this node holds no copy of is no-such-message."""
        ref = local_ref(check_ref(ref), self.node)
        if "@" not in ref:
            return ref
        ids = self.queries.named(ref)
        if not ids:
            raise WireError("no-such-message", f"no copy of message {ref} is here")
        return ids[0]

    def load(self, handle: str, mail_id: str) -> StoredMail | None:
        """A stored message, or None when it is not indexed or cannot be read."""
        row = self.index.get(handle, mail_id)
        if row is None:
            return None
        try:
            found = self.mailroom.load(handle, mail_id, row.state)
        except WireError:
            return None
        if found is None:
            return None
        path, meta, body = found
        return StoredMail(meta, body.decode("utf-8", "replace"), path, row.state)

    def check_replies(
        self,
        caller: Caller,
        targets: list[str],
        body: str,
        subject: str,
        key: str | None,
        parent: str,
    ) -> list[Send]:
        """One checked send per target, all before any is charged or sent. With several
        targets each needs its own key (keys are per sender), derived from the caller's."""
        if key is not None and len(targets) > 1:
            keys.check_client_key(key)
        specs: list[Send] = []
        for to in targets:
            own = key is None or len(targets) == 1
            each = key if own or key is None else keys.recipient_key(key, to)
            reply = m.MailSend(to=to, body=body, subject=subject, key=each, in_reply_to=parent)
            specs.append(self.check(caller, reply, client_key=own))
        return specs

    async def reply(self, specs: list[Send]) -> list[m.SendOk]:
        """The checked replies, in order (the caller checked the limits)."""
        sent: list[m.SendOk] = []
        for spec in specs:
            try:
                sent.append(await self.send(spec))
            except WireError as err:
                if not sent:
                    raise
                # A later recipient refused (a full mailbox, say): say what already went.
                done = ", ".join(f"{s.to} ({s.mail_id})" for s in sent)
                raise WireError(err.code, f"{err.message} (the reply to {done} was sent)") from None
        return sent
