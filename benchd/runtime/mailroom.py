"""The mailroom: mail/<handle>/inbox|read|tmp, one markdown file per message, delivered
durably before the answer and retired to read/ when read (docs/durability.md, docs/files.md).
The index makes list/read/send O(page)/O(log n); the files stay the record.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from bench_wire.addresses import check_address
from bench_wire.errors import WireError
from bench_wire.messages import (
    AgentWoken,
    ListOk,
    MailVanished,
    MessageMeta,
    ReadOk,
    SendOk,
)
from benchd.core import frontmatter, keys, sends
from benchd.core.frontmatter import FrontMatter
from benchd.core.names import (
    OPERATOR,
    SYSTEM_WALL,
    IdClock,
    WallClock,
    check_handle,
    check_mail_id,
    check_ref,
    format_ms,
)
from benchd.core.sends import Retire, Send, WakeRetire
from benchd.runtime.committer import Batch, Committer, EventOp, Op
from benchd.store import mailfile
from benchd.store.fileio import faults, write_all
from benchd.store.index import READ, STATE_NAMES, UNREAD, Index, MailRow
from benchd.store.journal import Rename, Write
from benchd.store.spares import Spares
from benchd.store.statedir import is_real_dir

BODY_BYTES = 256 * 1024
SUBJECT_CHARS = 200
LIST_DEFAULT = 50
LIST_MAX = 500


class Mailboxes:
    """Which handles have a mailbox: the ones this run delivered to (saves a stat call
    per send), the operator's, a live session's, or a directory on disk. Shared by the
    mailroom, the limiter and delegation, so none needs another to be built."""

    def __init__(self, root: str, is_live: Callable[[str], bool] = lambda handle: False):
        self.root = root  # BENCH_DIR/mail
        self.made: set[str] = set()  # delivered to by this run
        self.is_live = is_live  # whether a handle has a live session (its mail wakes it)

    def exists(self, handle: str) -> bool:
        return (
            handle in self.made
            or handle == OPERATOR
            or self.is_live(handle)
            or os.path.isdir(os.path.join(self.root, handle))
        )


class Mailroom:
    def __init__(
        self,
        root: str,
        index: Index,
        committer: Committer,
        mailboxes: Mailboxes,
        ids: IdClock,
        admit: Callable[[str, str, int, Batch], None] | None = None,
        wall: WallClock = SYSTEM_WALL,
        spares: Spares | None = None,
    ):
        self.root = root  # BENCH_DIR/mail
        self.index = index
        self.committer = committer
        self.wall = wall  # a new message's time, in its id and its Date
        self.clock = ids  # mail ids, strictly rising (resumed by the start-up)
        self.mailboxes = mailboxes
        self.boxes = mailboxes.made
        self.is_live = mailboxes.is_live
        self.admit = admit  # a send's mailbox caps (Limiter.admit); None: uncapped (tests)
        self.spares = spares  # empty files made ahead to stage messages in (or None)

    def path(self, handle: str, mail_id: str, state: int) -> str:
        sub = "read" if state == READ else "inbox"
        return os.path.join(self.root, handle, sub, mail_id + ".md")

    async def send(self, spec: Send) -> SendOk:
        """Deliver one message checked by `check_send`, once durable."""
        return await self.committer.submit(SendOp(self, spec))

    def check_send(
        self,
        sender: str,
        to: str,
        body: str,
        subject: str = "",
        key: str | None = None,
        reply_to: list[str] | None = None,
        in_reply_to: str | None = None,
        *,
        outbox_reply: bool = False,
        client_key: bool = False,
    ) -> Send:
        """A send checked, as a value: the one place every path checks a send's fields
        (those that need the batch: SendOp.check). `outbox_reply`: a job's reply.
        `client_key`: the caller's own key (no reserved prefix), not one derived from it."""
        check_handle(to, "recipient")
        if key is not None and client_key:
            keys.check_client_key(key)
        elif key is not None:
            keys.check_key(key)
        for h in reply_to or []:
            check_address(h, "reply-to")  # a handle, or handle@node on another node
        if in_reply_to is not None:
            check_ref(in_reply_to)  # an id here, or <id>@<node> sent from there
        if len(subject) > SUBJECT_CHARS:
            raise WireError(
                "subject-too-long",
                f"the subject is {len(subject)} characters; the cap is {SUBJECT_CHARS}",
            )
        why = frontmatter.check_subject(subject)
        if why:
            raise WireError("bad-subject", why)
        try:
            data = body.encode("utf-8")
        except UnicodeEncodeError:
            raise WireError("bad-request", "the body is not valid Unicode text") from None
        if len(data) > BODY_BYTES:
            raise WireError(
                "body-too-large", f"the body is {len(data)} bytes; the cap is {BODY_BYTES}"
            )
        return Send(
            sender=sender,
            to=to,
            subject=subject,
            body=data,
            key=key,
            reply_to=tuple(reply_to or ()),
            in_reply_to=in_reply_to,
            live=self.is_live(to),
            outbox_reply=outbox_reply,
        )

    def load(self, handle: str, mail_id: str, state: int) -> tuple[str, FrontMatter, bytes] | None:
        """A stored message: the path it was read from, its front matter and body. Looked
        for where `state` says, then in the other directory (moved meanwhile, or by hand);
        None when it is in neither. `bad-mail-file` when bench cannot read it."""
        other = READ if state == UNREAD else UNREAD
        for path in (self.path(handle, mail_id, state), self.path(handle, mail_id, other)):
            data = mailfile.load(path)
            if data is not None:
                return (path, *mailfile.read(path, data))
        return None

    def same_body(self, handle: str, mail_id: str, state: int, body: bytes) -> bool:
        """Whether the stored message has this body (a keyed resend). The subject is not
        compared: a retry that leaves it out is still the same message."""
        try:
            found = self.load(handle, mail_id, state)
        except WireError:
            return True  # unreadable: the key still names it
        return found is None or found[2] == body  # gone: the key still names it

    def list(self, handle: str, state: str, limit: int | None, cursor: str | None) -> ListOk:
        check_handle(handle)
        if limit is None:
            limit = LIST_DEFAULT
        if not 1 <= limit <= LIST_MAX:
            raise WireError("bad-limit", f"limit {limit} is outside 1-{LIST_MAX}")
        if cursor is not None:
            try:
                check_mail_id(cursor)  # refuses a cursor that is no string, too
            except WireError:
                raise WireError("bad-cursor", "the cursor is not one a listing returned") from None
        st = {"unread": UNREAD, "read": READ, "all": None}[state]
        rows = self.index.page(handle, st, cursor, limit)
        more = len(rows) > limit
        rows = rows[:limit]
        return ListOk(
            handle=handle,
            messages=[
                MessageMeta(
                    mail_id=r.mail_id,
                    sender=r.sender,
                    subject=r.subject,
                    date=r.date,
                    state=STATE_NAMES[r.state],
                    size=r.size,
                )
                for r in rows
            ],
            total=self.index.count(handle, st),
            cap=limit,
            truncated=more,
            cursor=rows[-1].mail_id if more else None,
        )

    async def read(self, handle: str, mail_id: str | None, reader: str) -> ReadOk:
        """A message's body; reading an unread one retires it. Without an id: the oldest
        unread one that can be shown. Hand edits: docs/durability.md, "Hand edits"."""
        check_handle(handle)
        if mail_id is None:
            return await self._read_oldest(handle, reader)
        check_mail_id(mail_id)
        row = self.index.get(handle, mail_id)
        if row is None:
            raise WireError("no-such-message", f"no message {mail_id} in {handle}'s mailbox")
        try:
            return await self._read_row(handle, row, reader, oldest=False)
        except _Skip:
            raise WireError(
                "no-such-message", f"no message {mail_id} in {handle}'s mailbox (its file is gone)"
            ) from None

    async def _read_oldest(self, handle: str, reader: str) -> ReadOk:
        after, bad = None, None
        while True:
            ids = self.index.unread_after(handle, after, 16)
            if not ids:
                if bad is not None:
                    raise bad  # only unparseable files are left: say so, naming one
                raise WireError("no-unread", f"no unread mail for {handle}")
            for mail_id in ids:
                row = self.index.get(handle, mail_id)
                if row is None or row.state != UNREAD:
                    continue
                try:
                    return await self._read_row(handle, row, reader, oldest=True)
                except _Skip:
                    continue
                except WireError as err:
                    if err.code != "bad-mail-file":
                        raise
                    bad = bad or err  # never blocks the messages after it
            after = ids[-1]

    async def _read_row(self, handle: str, row: MailRow, reader: str, oldest: bool) -> ReadOk:
        mail_id, state = row.mail_id, row.state
        inbox, read = self.path(handle, mail_id, UNREAD), self.path(handle, mail_id, READ)
        found = self.load(handle, mail_id, state)
        if found is None:
            self.vanished(handle, mail_id, self.path(handle, mail_id, state))
            raise _Skip
        path, meta, body = found
        retired = False
        if path == inbox and state == UNREAD:
            try:
                retired = await self.committer.submit(
                    RetireOp(self, Retire(handle, mail_id, reader, event=True))
                )
            except WireError as err:
                if err.code != "disk-full":
                    raise
                # A full disk must not keep anyone from reading their mail: shown, and
                # left unread (retired: false) until the retirement can be written.
                retired = False
            if retired:
                path = read
        elif path == read and state == UNREAD:
            # A person moved it to read/: it counts as read (and is not "the oldest unread").
            self.index.set_state(handle, mail_id, READ)
            if oldest:
                raise _Skip
        return ReadOk(
            mail_id=mail_id,
            sender=meta.sender,
            to=meta.to,
            subject=meta.subject,
            date=meta.date,
            body=body.decode("utf-8", "replace"),
            path=path,
            key=meta.key,
            retired=bool(retired),
            reply_to=list(meta.reply_to),
            in_reply_to=meta.in_reply_to,
        )

    def vanished(self, handle: str, mail_id: str, path: str) -> None:
        """A file the index lists is gone from both inbox/ and read/ (the files are the
        record)."""
        self.index.remove(handle, mail_id)
        try:
            self.committer.enqueue(EventOp(MailVanished(mail_id=mail_id, handle=handle, path=path)))
        except WireError:
            pass  # stopping: the next start's reconcile drops it again

    async def retire_for_wake(
        self, session: str, handle: str, mail_id: str, sender: str, door: str | None = None
    ) -> AgentWoken | None:
        """Retire for a wake, logging its `agent/woken` in the same commit; None when the
        message was already read (or is gone)."""
        row = self.index.get(handle, mail_id)
        if row is None or row.state != UNREAD:
            return None
        op = RetireOp(self, WakeRetire(handle, mail_id, session=session, sender=sender, door=door))
        if await self.committer.submit(op):
            woken = op.events[0]
            assert isinstance(woken, AgentWoken), "a wake's retirement logs agent/woken"
            return woken
        inbox = self.path(handle, mail_id, UNREAD)
        # Two stats of local files, on a rare path: not worth a thread.
        gone = not os.path.exists(inbox) and not os.path.exists(self.path(handle, mail_id, READ))  # noqa: ASYNC240
        if gone:
            self.vanished(handle, mail_id, inbox)  # removed by hand: nothing to announce
        return None

    def unread_count(self, handle: str) -> int:
        return self.index.count(handle, UNREAD)

    def oldest_unread(self, handle: str) -> MailRow | None:
        ids = self.index.unread_after(handle, None, 1)
        return self.index.get(handle, ids[0]) if ids else None

    def is_unread(self, handle: str, mail_id: str) -> bool:
        row = self.index.get(handle, mail_id)
        return row is not None and row.state == UNREAD


class _Skip(Exception):
    """This message cannot be shown (its file vanished, or it was read by hand)."""


@dataclass(frozen=True)
class Delivery:
    """A send's message as staged: its file in tmp/ (or a spare), where it goes once
    committed, and the front matter written."""

    tmp: str
    final: str
    meta: FrontMatter


class SendOp(Op[SendOk]):
    """Runs a send of any kind (`spec`, a frozen benchd.core.sends.Send): what it
    writes and logs is the spec's. The run is `check` (which returns the answer of a
    duplicate key) and `prepare` (the `Delivery`, its journal entries, events and
    answer, set together); the later phases only read them."""

    def __init__(self, room: "Mailroom", spec: Send) -> None:
        super().__init__()
        self.room, self.spec = room, spec
        self.delivery: Delivery | None = None

    @property
    def meta(self) -> FrontMatter:
        assert self.delivery is not None, "prepare() staged the message"
        return self.delivery.meta

    def _admit(self, batch: Batch) -> None:
        # Here, where the batch commits, every send before this one is counted (those of
        # earlier batches in the index's tally, this batch's in `batch.unread`), so no
        # number of concurrent sends takes a mailbox past its caps.
        admit = self.room.admit
        if self.spec.capped and admit is not None:
            admit(self.spec.sender, self.spec.to, len(self.spec.body), batch)

    def check(self, ctx: Committer) -> Callable[[], SendOk] | None:
        room: Mailroom = self.room
        spec = self.spec
        if spec.key is None:
            self._admit(ctx.batch)
            return None
        seen = ctx.batch.keys
        first = seen.get((spec.sender, spec.key))
        if isinstance(first, SendOp):  # only sends claim keys
            # The same key earlier in this batch: this answer is that op's answer
            # (or its failure), taken once the batch is done.
            if (first.spec.to, first.spec.body) != (spec.to, spec.body):
                raise _key_conflict(spec.key)
            return lambda: msgspec.structs.replace(first.outcome(), duplicate=True)
        hit = ctx.index.find_key(spec.sender, spec.key)
        if hit is not None:
            # A key names one message, as in payment APIs: a resend must be the same
            # message (read back only on a key hit, so an ordinary send costs nothing).
            if hit.handle != spec.to or not room.same_body(
                hit.handle, hit.mail_id, hit.state, spec.body
            ):
                raise _key_conflict(spec.key)
            live = room.is_live(hit.handle)
            sent = SendOk(
                mail_id=hit.mail_id,
                path=room.path(hit.handle, hit.mail_id, hit.state),
                to=hit.handle,
                key=spec.key,
                live=live,
                duplicate=True,
                note=None if live else "no-live-session",
            )
            return lambda: sent
        seen[(spec.sender, spec.key)] = self  # a same-key resend now shares this op's fate
        self._admit(ctx.batch)
        return None

    def prepare(self, batch: Batch) -> None:
        room: Mailroom = self.room
        spec = self.spec
        ms = room.wall.wall_ms()
        mail_id, _ = room.clock.next(ms)
        key = spec.key or f"auto-{mail_id}"
        box = os.path.join(room.root, spec.to)
        # Mail to a handle with no mailbox on disk and no live session (not the operator)
        # is said so in the answer, so a typo shows at once; it is still delivered.
        new_mailbox = False
        if spec.to not in room.boxes:  # a mailbox is made on first delivery
            new_mailbox = not spec.live and spec.to != OPERATOR and not os.path.lexists(box)
            for sub in ("inbox", "read", "tmp"):
                d = os.path.join(box, sub)
                for path in (box, d):  # never create or deliver through a link
                    if os.path.lexists(path) and not is_real_dir(path):
                        raise WireError(
                            "unsafe-dir",
                            f"{path} is not a real directory (a "
                            "link?): refusing to deliver through it",
                        )
                if not os.path.isdir(d):
                    # Made durable by the journal's checkpoint (and made again by its
                    # replay, should a crash come first).
                    os.makedirs(d, mode=0o700, exist_ok=True)
            room.boxes.add(spec.to)
        meta = sends.front_matter(spec, mail_id, key, format_ms(ms))
        data = frontmatter.render(meta, spec.body)
        final = room.path(spec.to, mail_id, UNREAD)
        faults.check("deliver")
        spare = None if room.spares is None else room.spares.take()
        if spare is not None:
            fd, tmp = spare  # made ahead: no inode to allocate here, on the loop
        else:
            tmp = os.path.join(box, "tmp", mail_id + ".md")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.delivery = Delivery(tmp, final, meta)  # discard() removes tmp from here on
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        # No flush: the batch's journal record carries the bytes (the commit point).
        self.entries = (Write(final, data, room.path(spec.to, mail_id, READ)),)
        self.events = sends.sent_events(spec, meta, final)
        self.result = SendOk(
            mail_id=mail_id,
            path=final,
            to=spec.to,
            key=key,
            live=spec.live,
            note=None if spec.live else "no-live-session",
            new_mailbox=new_mailbox,
        )

    def place(self) -> None:
        d = self.delivery
        assert d is not None, "prepare() staged the file"
        os.rename(d.tmp, d.final)

    def discard(self) -> None:
        # Only before place() (the op or its batch failed): tmp is still the staged file.
        d = self.delivery
        if d is not None and os.path.exists(d.tmp):
            os.unlink(d.tmp)

    def index(self, idx: Index) -> None:
        if self.delivery is None:
            return
        m = self.delivery.meta
        body = self.spec.body
        idx.add(self.spec.to, m.id, UNREAD, m.sender, m.subject, m.date, len(body), m.key, new=True)
        idx.add_text(self.spec.to, m.id, m, body)


def _key_conflict(key: str) -> WireError:
    return WireError(
        "key-conflict",
        f"the key {key!r} already names a message with another "
        "recipient or body; a new message needs a new key",
    )


class RetireOp(Op[bool]):
    """Runs a retirement (`spec`: a Retire, WakeRetire or Forward); whether it moved."""

    def __init__(self, room: Mailroom, spec: Retire):
        super().__init__()
        self.room, self.spec = room, spec
        self.result = False

    def prepare(self, batch: Batch) -> None:
        spec = self.spec
        src = self.room.path(spec.handle, spec.mail_id, UNREAD)
        # Retired earlier in this same batch, or gone: nothing to do.
        if src in batch.moves or not os.path.exists(src):
            return
        batch.moves.add(src)
        dst = self.room.path(spec.handle, spec.mail_id, READ)
        self.entries = (Rename(src, dst),)
        self.events = sends.retired_events(spec, dst)

    def place(self) -> None:
        if not self.entries:  # nothing to move (see prepare)
            return
        spec = self.spec
        src = self.room.path(spec.handle, spec.mail_id, UNREAD)
        try:
            os.rename(src, self.room.path(spec.handle, spec.mail_id, READ))
        except FileNotFoundError:
            return  # moved by hand since prepare; the index finds it where it is
        self.result = True

    def index(self, idx: Index) -> None:
        if self.result:
            idx.set_state(self.spec.handle, self.spec.mail_id, READ)
