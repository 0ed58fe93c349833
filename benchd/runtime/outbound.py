"""Mail between nodes, the daemon's half: the outbound queue and the bridge's verbs
(docs/nodes.md). The queue is the mailbox `@outbound` (no handle can name it), so
queued mail gets the mailroom's guarantees.
"""

import hashlib
import re
import secrets

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.addresses import check_address, resolve, split_address
from bench_wire.errors import WireError
from benchd.core import frontmatter, names
from benchd.core.frontmatter import FrontMatter, check_subject
from benchd.core.names import MAIL_ID_RE, SYSTEM_WALL, WallClock, check_mail_id
from benchd.core.sends import Bounce, Deliver, Forward, Queue
from benchd.runtime.committer import Committer
from benchd.runtime.mailroom import SUBJECT_CHARS, Mailroom, RetireOp, SendOp
from benchd.runtime.nodes import OUTBOUND, Directory, remote_sender
from benchd.store.index import UNREAD, Index

# Bounces (docs/nodes.md, "Bounces"): pure text and names; the queueing is Outbound.bounce.
POSTMASTER = "postmaster"
_CODE_RE = re.compile(r"^  code:\s+(\S+)$", re.M)
_REASON_RE = re.compile(r"^  reason:\s+(.*)$", re.M)


def bounce_key(origin: str, sender: str, key: str) -> str:
    digest = hashlib.sha256(f"{origin}\n{sender}\n{key}".encode()).hexdigest()[:40]
    return f"bounce-{digest}"


def is_bounce(sender: str) -> bool:
    return sender.partition("@")[0] == POSTMASTER


def bounce_subject(code: str, original: str) -> str:
    text = f"Undelivered [{code}]: {original}" if original else f"Undelivered [{code}]"
    text = text[:SUBJECT_CHARS]
    return text if check_subject(text) is None else f"Undelivered [{code}]"[:SUBJECT_CHARS]


def bounce_body(
    node: str, mail_id: str, to: str, original_subject: str, key: str, code: str, reason: str
) -> str:
    one_line = " ".join(reason.split())[:500]
    return (
        f"Your message could not be delivered on node {node}; nothing of it was kept there.\n"
        "\n"
        f"  id:      {mail_id}\n"
        f"  to:      {to}\n"
        f"  subject: {' '.join(original_subject.split())}\n"
        f"  key:     {key}\n"
        f"  code:    {code}\n"
        f"  reason:  {one_line}\n"
    )


def parse_bounce(text: str) -> tuple[str, str]:
    """(code, reason) from a bounce's body; ("", "") when it does not say."""
    code = _CODE_RE.search(text)
    reason = _REASON_RE.search(text)
    return (code.group(1) if code else "", reason.group(1) if reason else "")


PULL_MAX = 256
RECENT_MAX = 4096  # queued messages kept in memory for the bridge's pull


class Outbound:
    def __init__(
        self,
        node: str,
        index: Index,
        mailroom: Mailroom,
        committer: Committer,
        directory: Directory,
        wall: WallClock = SYSTEM_WALL,
    ) -> None:
        self.node = node
        self.wall = wall  # the bridge's last heartbeat, the directory's and receipts' times
        self.index = index
        self.mailroom = mailroom
        self.committer = committer
        self.directory = directory
        self._queued = trio.Event()  # set when mail is queued; replaced after each wait
        # What the bridge will pull, kept from the commit until it is marked forwarded,
        # so neither bridge/pull nor bridge/forwarded reads the file back. Bounded: the
        # oldest are dropped first; those (and all after a restart) are read from disk.
        self.recent: dict[str, m.RemoteMail] = {}
        self.bridge_connected = False
        self.bridge_seen_ms: int | None = None
        self.bridge_stale_after = 15.0
        self.bridge_error: m.ErrorBody | None = None

    def queued(self) -> int:
        return self.index.count(OUTBOUND, UNREAD)

    def info(self) -> m.BridgeInfo:
        seen = self.bridge_seen_ms
        fresh = seen is not None and self.wall.wall_ms() - seen <= self.bridge_stale_after * 1000
        return m.BridgeInfo(
            connected=self.bridge_connected and fresh,
            seen_ms=seen,
            queued=self.queued(),
            error=self.bridge_error,
        )

    async def send(self, spec: Queue) -> m.SendOk:
        op = SendOp(self.mailroom, spec)
        res: m.SendOk = await self.committer.submit(op)
        return self.queued_as(op, res)

    def queue_spec(
        self,
        sender: str,
        address: str,
        body: str,
        subject: str = "",
        key: str | None = None,
        reply_to: list[str] | None = None,
        in_reply_to: str | None = None,
        *,
        outbox_reply: bool = False,
        client_key: bool = False,
        any_node: bool = False,
    ) -> Queue:
        """Mail from the local handle `sender` to `address` on another node, checked and
        pointed at the outbound queue. The node must be one the directory knows, unless
        `any_node` (a bounce to the node that just sent)."""
        knows = None if any_node else self.directory.knows
        handle, node = resolve(address, self.node, knows, "recipient")
        if node is None:
            raise WireError("bad-request", f"{address} is not on another node")
        qualified = tuple(self.qualify(check_address(a, "reply-to")) for a in reply_to or [])
        # Checked as a send to `handle`, then made a send into the @outbound mailbox.
        send = self.mailroom.check_send(
            f"{sender}@{self.node}",
            handle,
            body,
            subject,
            key,
            None,
            in_reply_to,
            outbox_reply=outbox_reply,
            client_key=client_key,
        )
        return Queue.of(
            send,
            mailbox=OUTBOUND,
            address=address,
            reply_to=qualified,
            nonce=secrets.token_hex(16),
        )

    def queued_as(self, op: SendOp, res: m.SendOk) -> m.SendOk:
        """After the queue op committed: hand it to the bridge; the answer as a send's."""
        if not res.duplicate:
            if len(self.recent) >= RECENT_MAX:
                del self.recent[next(iter(self.recent))]
            self.recent[op.meta.id] = remote_mail(op.meta, op.spec.body, self.node)
        self._queued.set()
        address = op.spec.address
        node = split_address(address)[1] or ""
        return msgspec.structs.replace(res, to=address, live=False, note=f"queued-for-{node}")

    def qualify(self, address: str) -> str:
        return address if "@" in address else f"{address}@{self.node}"

    async def wait_queued(self, timeout: float) -> None:  # noqa: ASYNC109 - a long poll's bound
        self._queued = trio.Event()
        with trio.move_on_after(timeout):
            await self._queued.wait()

    def queued_mail(self, mail_id: str) -> m.RemoteMail | None:
        """A queued message as the bridge publishes it; None when forwarded meanwhile."""
        mail = self.recent.get(mail_id)
        if mail is not None:
            return mail
        try:
            with open(self.mailroom.path(OUTBOUND, mail_id, UNREAD), "rb") as f:
                meta, body = frontmatter.read(f.read())
        except FileNotFoundError:
            return None
        return remote_mail(meta, body, self.node)

    def forgotten(self, mail_id: str) -> None:
        self.recent.pop(mail_id, None)

    def inbound_op(self, msg: m.RemoteMail, origin: str) -> SendOp:
        handle, node = split_address(msg.to, "recipient")
        if node is not None and node != self.node:
            raise WireError("wrong-node", f"{msg.to} is not on this node ({self.node})")
        # Its identity: the id the node it was sent from gave it (bad-id if none).
        check_mail_id(msg.mail_id)
        if split_address(msg.sender, "sender")[1] != origin:
            raise WireError(
                "forged-sender",
                f"{msg.sender!r} came from node {origin}: a node sends only as itself",
            )
        sender = remote_sender(msg.sender, origin, self.node)
        reply_to = []
        for a in msg.reply_to:
            try:
                # A reply-to may name this node (it is where replies go, not a sender).
                a = check_address(a, "reply-to")
                reply_to.append(a if "@" in a else f"{a}@{origin}")
            except WireError:
                continue  # a bad reply-to address is dropped, the message still delivered
        in_reply_to = self._reference(msg, origin)  # a bad one is dropped: the mail lands
        send = self.mailroom.check_send(
            sender, handle, msg.body, msg.subject, msg.key, None, in_reply_to
        )
        spec = Deliver.of(
            send,
            reply_to=tuple(reply_to),
            origin_node=origin,
            origin_id=msg.mail_id,
            bounced=self._returned(msg, sender, handle, origin),
        )
        return SendOp(self.mailroom, spec)

    def _reference(self, msg: m.RemoteMail, origin: str) -> str | None:
        """Its `in-reply-to` as this node writes it; None if none or a bad one."""
        try:
            ref = msg.in_reply_to
            return None if ref is None else names.received_ref(ref, origin, self.node)
        except WireError:
            return None

    def _returned(
        self, msg: m.RemoteMail, sender: str, handle: str, origin: str
    ) -> m.BridgeBounced | None:
        """bridge/bounced on the sender's node, when a bounce reaches it."""
        if not is_bounce(sender):
            return None
        code, reason = parse_bounce(msg.body)
        original = self._reference(msg, origin) or msg.mail_id  # as this node names it
        return m.BridgeBounced(
            mail_id=original,
            sender=f"{handle}@{self.node}",
            to=msg.to,
            key=msg.key,
            node=origin,
            code=code,
            reason=reason,
        )

    async def bounce(self, msg: m.RemoteMail, origin: str, error: m.ErrorBody) -> str | None:
        """Return a refused message to its sender from postmaster@<this node>: the
        bounce's id, or None (a bounce is never bounced, a forged sender not written to)."""
        if is_bounce(msg.sender) or error.code == "forged-sender":
            return None
        try:
            if split_address(msg.sender, "sender")[1] != origin:
                return None
        except WireError:
            return None
        text = bounce_body(
            self.node, msg.mail_id, msg.to, msg.subject, msg.key, error.code, error.message
        )
        # In reply to the original by its identity (its id on its sender's node), as
        # references between nodes always are (benchd.core.names).
        original = f"{msg.mail_id}@{origin}" if MAIL_ID_RE.fullmatch(msg.mail_id) else None
        subject = bounce_subject(error.code, msg.subject)
        key = bounce_key(origin, msg.sender, msg.key)
        queued = self.queue_spec(
            POSTMASTER, msg.sender, text, subject, key, None, original, any_node=True
        )
        returned = m.BridgeBounced(
            mail_id=msg.mail_id,
            sender=msg.sender,
            to=msg.to,
            key=msg.key,
            node=self.node,
            code=error.code,
            reason=error.message[:500],
        )
        return (await self.send(Bounce.returning(queued, returned))).mail_id

    def bridge_reported(self, req: m.BridgeReport) -> list[str]:
        """The bridge's heartbeat; the nodes forgotten (gone from the bucket, or quiet too
        long)."""
        self.bridge_connected = req.connected
        self.bridge_seen_ms = self.wall.wall_ms()
        self.bridge_stale_after = max(1.0, req.stale_after)
        self.bridge_error = req.error
        self.directory.forget_after = max(1.0, req.forget_after)
        if req.nodes is None:
            return []
        return self.directory.update(req.nodes)


def remote_mail(meta: FrontMatter, body: bytes, own: str) -> m.RemoteMail:
    """A queued message as the bridge publishes it (its in-reply-to in full)."""
    in_reply_to = meta.in_reply_to
    if in_reply_to is not None:
        in_reply_to = names.full_ref(in_reply_to, own)
    return m.RemoteMail(
        mail_id=meta.id,
        sender=meta.sender,
        to=meta.to,
        key=meta.key,
        body=body.decode("utf-8"),
        subject=meta.subject,
        date=meta.date,
        reply_to=list(meta.reply_to),
        in_reply_to=in_reply_to,
        nonce=meta.nonce or "",
    )


def forward_op(room: Mailroom, mail_id: str, key: str, to: str) -> RetireOp:
    """Marks a queued message forwarded (inbox/ -> read/ of @outbound)."""
    return RetireOp(room, Forward(OUTBOUND, mail_id, key=key, to=to))
