"""The committer: the daemon's one durable-write pipeline, with group commit. Everything
that must be on disk before an answer is an `Op`; one task commits every op waiting as
one batch, all on the loop (the steps, and why: ARCHITECTURE.md, "One `bench mail
send`", and docs/durability.md). It reaches the disk only through the `Store` port, so a
unit test drives it with a fake store. The index's changes reach SQLite once
INDEX_COMMIT_S old or when the committer falls idle: a commit per batch cost about a
fifth of the lone-send rate (WAL pages).
"""

import errno
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import msgspec
import trio

from bench_wire.errors import WireError
from bench_wire.messages import Event, LogRotated
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.runtime.hub import Record as EventRecord  # an event as its log line holds it
from benchd.store.eventlog import EventLog
from benchd.store.index import Index
from benchd.store.journal import Append, Entry, Journal, Write

MAX_BATCH = 256
INDEX_COMMIT_S = 0.1  # how long index updates may wait for their commit
_encoder = msgspec.json.Encoder()

# What an op answers with once its batch is durable (SendOk for a send, whether a
# retirement moved the file, None for events only). Covariant: the committer holds ops
# of every kind as Op[object].
R_co = TypeVar("R_co", covariant=True)
R = TypeVar("R")


def encode_event(ev: Event, seq: int, ts: int) -> tuple[bytes, EventRecord, Event]:
    """One log line (seq, ts, kind first, so lines read well), its record, and the event
    as logged. Stamped on the record and a copy, never on `ev`: its caller may still
    hold it, and a batch that fails and is tried again logs it afresh."""
    fields: EventRecord = msgspec.to_builtins(ev)
    record: EventRecord = {"seq": seq, "ts": ts, "kind": fields.pop("kind")}
    fields.pop("seq", None)
    fields.pop("ts", None)
    record.update(fields)
    return _encoder.encode(record) + b"\n", record, msgspec.structs.replace(ev, seq=seq, ts=ts)


class Op(Generic[R_co]):
    """A unit of durable work: subclasses override the phases they need, and set `result`
    (or `error`) by the time their batch is done."""

    error: WireError | None = None
    result: R_co

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.done = trio.Event()

    async def wait(self) -> R_co:
        await self.done.wait()
        return self.outcome()

    def outcome(self) -> R_co:
        """The op's result, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.result

    # What the op's commit does, for the journal (set by prepare): Write and Rename.
    entries: tuple[Entry, ...] | list[Entry] = ()

    def check(self, ctx: "Committer") -> Callable[[], R_co] | None:
        """On the loop, before the batch is staged: lookups in the index. Raise WireError
        to fail the op. Returns its answer when there is nothing to write (a duplicate
        key), taken once the batch is done (`settle`); None: the op goes on."""
        return None

    def prepare(self, batch: "Batch") -> None:
        """Stage files in tmp/ without a flush, set `events` and `entries`. Raise
        WireError/OSError to fail the op alone."""

    def place(self) -> None:
        """After the commit point: move staged files into place (no flush)."""

    def index(self, idx: Index) -> None:
        """Apply the op to the index's in-memory layer."""

    def discard(self) -> None:
        """Remove what prepare staged (the op or its batch failed)."""

    def finish(self) -> None:
        """After the batch: settle answers that depend on other ops."""


class Batch:
    """What the ops of one batch share while they commit."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], Op[object]] = {}  # (sender, key) -> its op
        self.moves: set[str] = set()  # files a retirement moves
        # mailbox -> [messages, bytes] the batch's sends add unread so far (caps: Limiter.admit)
        self.unread: dict[str, list[int]] = {}


class EventOp(Op[None]):
    def __init__(self, *events: Event):
        super().__init__()
        self.events = list(events)
        self.result = None


Written = tuple[list[Op[object]], list[EventRecord], list[Event]]


class Store(Protocol):
    """The committer's port to the disk (`JournalStore`; a fake in unit tests)."""

    @property
    def last_seq(self) -> int: ...

    def write(self, batch: Batch, ops: list[Op[object]]) -> Written:
        """Stage the ops (one that fails is left out, its error set), commit them in one
        journal record and move them into place: the ops committed, their event records
        and their events as logged (`encode_event`). A batch that fails as a whole is
        taken back, each op failed."""

    def published(self, seq: int) -> None: ...

    def close(self) -> bool:
        """A clean stop; False if flushing what was committed failed."""


class JournalStore:
    """The real store: the event log and the write-ahead journal."""

    def __init__(self, eventlog: EventLog, journal: Journal, wall: WallClock = SYSTEM_WALL) -> None:
        self.eventlog = eventlog
        self.journal = journal
        self.wall = wall  # dates the events (their `ts`)

    @property
    def last_seq(self) -> int:
        return self.eventlog.last_seq

    def published(self, seq: int) -> None:
        self.eventlog.published_seq = seq

    def close(self) -> bool:
        return self.journal.close()

    def write(self, batch: Batch, ops: list[Op[object]]) -> Written:
        live: list[Op[object]] = []
        for op in ops:
            try:
                op.prepare(batch)
                live.append(op)
            except Exception as err:  # noqa: BLE001 - every failure becomes that op's answer
                fail(op, err)
        if not live:
            return [], [], []
        if self.eventlog.due():
            rotated = self._rotate()
            if rotated is not None:
                live.insert(0, rotated)  # the new file's first line; nobody waits on it
        # Numbered after the last seq, all dated now: (line, record, event as logged).
        first, ts = self.eventlog.last_seq + 1, self.wall.wall_ms()
        events = [ev for op in live for ev in op.events]
        encoded = [encode_event(ev, seq, ts) for seq, ev in enumerate(events, first)]
        entries = [e for op in live for e in op.entries]
        offset = None  # where the batch's log lines start, once written
        try:
            if encoded:
                offset, data = self.eventlog.write([e[0] for e in encoded])
                entries.append(Append(offset, data))
            if entries:
                # On the loop: the journal dates its segments by trio's clock.
                self.journal.commit(entries)  # the commit point
        except Exception as err:  # noqa: BLE001 - the batch fails as a whole: taken back
            if offset is not None:
                self.eventlog.truncate(offset)
            for op in live:
                fail(op, err)
            return [], [], []
        self.eventlog.last_seq = first - 1 + len(encoded)
        for op in live:
            try:
                op.place()
            except OSError as err:
                # Committed (the journal has it, and the next start puts it in place),
                # but not where reads look now: say so rather than answer success.
                op.error = WireError(
                    "io-error", f"the message was committed but could not be placed ({err})"
                )
        return live, [e[1] for e in encoded], [e[2] for e in encoded]

    def _rotate(self) -> EventOp | None:
        """The event log is at its bound: checkpoint the journal (so no record names an
        offset in the log), rotate, and log log/rotated. On a failure the log grows on
        and the next batch tries again."""
        if not self.journal.checkpoint_now():
            return None
        try:
            dropped, kept_from = self.eventlog.rotate()
        except OSError:
            return None
        return EventOp(
            LogRotated(dropped=dropped, kept_from=kept_from, bound=self.eventlog.max_bytes)
        )


def settle(op: Op[R], answer: Callable[[], R]) -> None:
    """Answer an op that check() found nothing to write for (its answer may be another
    op's of the batch, failure included)."""
    try:
        op.result = answer()
    except WireError as err:
        op.error = err


def fail(op: Op[object], err: Exception) -> None:
    if isinstance(err, WireError):
        op.error = err
    elif isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        op.error = WireError("disk-full", f"the disk is full; nothing was written ({err.strerror})")
    elif isinstance(err, OSError):
        op.error = WireError("io-error", f"the disk refused the write; nothing was written ({err})")
    else:
        op.error = WireError("internal", f"the write failed: {err!r}")
    try:
        op.discard()
    except Exception:  # noqa: BLE001
        pass


class Committer:
    def __init__(
        self,
        store: Store,
        index: Index,
        publish: Callable[[list[EventRecord], list[Event]], None],
        *,
        on_lost: Callable[[tuple[Event, ...], WireError], None] | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self._publish = publish
        self._pending: list[Op[object]] = []
        self._wakeup = trio.Event()
        self.closed = False
        self.on_lost = on_lost  # told about events record() could not write
        self.batch = Batch()  # the batch being checked (ops' check() claims keys in it)
        self.disk_full = False  # the last batch that wrote nothing met a full disk

    def enqueue(self, op: Op[object]) -> None:
        """Queue the op for the next batch; `await op.wait()` for its answer."""
        if self.closed:
            raise WireError("shutting-down", "the daemon is stopping")
        self._pending.append(op)
        self._wakeup.set()

    async def submit(self, op: Op[R]) -> R:
        self.enqueue(op)
        return await op.wait()

    async def record(self, *events: Event) -> bool:
        """Log events no client waits on; whether they were written. Never raises: a disk
        that refuses the log must not take a background task, or the daemon, down."""
        try:
            await self.submit(EventOp(*events))
            return True
        except WireError as err:
            if self.on_lost is not None:
                self.on_lost(events, err)
            return False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            # One pass of the scheduler per batch, this wait's: a batch commits without
            # awaiting anything (no lock, no second wait on an event already set), so the
            # ops of everyone who ran meanwhile are in it, and a lone sender's send costs
            # three passes (its request, this batch, its answer) instead of five.
            if self._wakeup.is_set():
                # Ops past MAX_BATCH, or queued by the last batch's own callbacks: the
                # others run first.
                await trio.lowlevel.checkpoint()
            elif self.index.pending.changes or self.index.pending.meta:
                # Index changes not yet committed: commit them once they are
                # INDEX_COMMIT_S old (and past any retry backoff), unless work comes first.
                with trio.move_on_after(self.index.flush_in(INDEX_COMMIT_S)):
                    await self._wakeup.wait()
                if not self._wakeup.is_set():
                    self.commit_index()
                    continue
            else:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            if batch:
                self._commit(batch)
            if self._pending:
                self._wakeup.set()  # the rest after a pass of the others (above)
            if self.index.due(INDEX_COMMIT_S):
                self.commit_index()

    async def drain(self) -> None:
        """Commit whatever is waiting now, the index too (at shutdown)."""
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            self._commit(batch)
        self.commit_index()
        await trio.lowlevel.checkpoint()

    def commit_index(self) -> None:
        """Commit the index changes of the batches since the last commit. A failure keeps
        them in memory (reads still see them) and is retried with backoff; one that
        persists, or corruption, rebuilds the index from the files."""
        idx = self.index
        if not idx.flush() and idx.needs_rebuild:
            idx.recover_now(f"the index could not be written: {idx.last_error}")

    def close(self) -> bool:
        return self.store.close()

    def _commit(self, batch: list[Op[object]]) -> None:
        try:
            self._commit_batch(batch)
        except Exception as err:  # noqa: BLE001 - answer every op; keep committing
            for op in batch:
                if not op.done.is_set():
                    op.error = op.error or WireError("internal", f"the commit failed: {err!r}")
                    op.done.set()

    def _commit_batch(self, ops: list[Op[object]]) -> None:
        batch = Batch()
        self.batch = batch  # the ops' check() claims keys in it
        answers: dict[Op[object], Callable[[], object]] = {}
        for op in ops:
            try:
                answer = op.check(self)
            except Exception as err:  # noqa: BLE001 - every failure becomes that op's answer
                fail(op, err)
                continue
            if answer is not None:
                answers[op] = answer
        live = [op for op in ops if op.error is None and op not in answers]
        # On the loop: a worker thread's hand-offs cost ~20% of the CPU per send
        # (ARCHITECTURE.md), and what arrives meanwhile makes the next batch bigger.
        published, records, logged = self.store.write(batch, live) if live else ([], [], [])
        if published:
            # In memory (Index.pending): cannot fail for SQLite's reasons, so what is
            # answered is listed and deduplicated from now on.
            for op in published:
                if op.error is None:
                    op.index(self.index)
            self.index.set_meta("last_seq", str(self.store.last_seq))
        if records:
            self.store.published(records[-1]["seq"])
            # The same events, typed and stamped, in the order the store encoded them.
            self._publish(records, logged)
        if any(type(e) is Write for op in published for e in op.entries):
            self.disk_full = False  # a file was written: there is room for mail again
        elif any(op.error is not None and op.error.code == "disk-full" for op in ops):
            self.disk_full = True  # `bench status` says so until a file gets through
        for op in ops:
            if op in answers:
                settle(op, answers[op])
            op.finish()
            op.done.set()
