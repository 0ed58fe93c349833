"""The committer: the daemon's one durable-write pipeline, with group commit.

Everything that must be on disk before an answer (a delivered message, a retirement,
an event) is an `Op` submitted here. One task takes every op that is waiting and
commits them as one batch:

  0. check    - on the loop: each op's lookups in the index (idempotency keys)
  1. prepare  - each op stages its files in tmp/; then all of them are made durable
                together (an fdatasync of each, issued at once from worker threads)
  2. place    - each op renames its files into place
  3. log      - the batch's events appended to events.jsonl with one write; the touched
                directories (fsync) and the log (fdatasync) are then flushed together
  4. index    - on the loop: the ops applied to the index's in-memory layer

and only then are the ops' callers answered. Steps 1-3 run in a worker thread when the
batch has several ops, so the loop reads the next batch meanwhile. A failure in 1-2
fails that op alone; a failure in 3 takes back the batch's renames (nothing
unacknowledged stays visible) and fails the batch. Concurrent senders therefore share
the directory and log flushes. No syncfs(2): it would also wait for every dirty page
other programs left on the filesystem (a build, a download), which stalled sends for
hundreds of ms under a bulk writer.

The index is a cache of the files: step 4 cannot fail for SQLite's reasons (see
index.py), and its changes are committed to SQLite once INDEX_COMMIT_S old or when the
committer falls idle, on the loop, with SQLite's busy timeout at 0 (a lock held by
another program fails the commit at once; it is retried with backoff). Why not a commit
per batch: every commit writes WAL pages, and in a micro-benchmark of the lone-send path
a commit per send cost about a fifth of the rate.
"""

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import trio

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

from bench_wire.errors import WireError
from bench_wire.messages import Event
from benchd.store.eventlog import EventLog
from benchd.store.index import Index

MAX_BATCH = 256
INDEX_COMMIT_S = 0.1  # how long index updates may wait for their commit
_encoder = msgspec.json.Encoder()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Flusher:
    """Makes files durable with an fsync (fdatasync for files) of each, issued together
    from worker threads, never with syncfs(2): a flush waits only for bench's own files,
    not for every dirty page another program left on the filesystem. ext4 folds
    fsyncs that are in flight together into one journal commit, so a batch's files still
    cost about one commit."""

    WORKERS = 16

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None  # made on first use

    def flush(self, files=(), dirs=(), fds=()) -> None:
        """fdatasync each file (by path) and fd, fsync each directory; raises the first
        OSError once all of them are done."""
        jobs: list[tuple[Callable[..., None], object]] = [(_fdatasync_path, p) for p in files]
        jobs += [(_fsync_path, d) for d in sorted(dirs)]
        jobs += [(os.fdatasync, fd) for fd in fds]
        if len(jobs) <= 1:
            for fn, arg in jobs:
                fn(arg)
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="flush")
        futures = [self._pool.submit(fn, arg) for fn, arg in jobs]
        errors = [f.exception() for f in futures]
        for err in errors:
            if err is not None:
                raise err


def _sync_path(path: str, sync: Callable[[int], None], flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        sync(fd)
    finally:
        os.close(fd)


def _fdatasync_path(path: str) -> None:
    _sync_path(path, os.fdatasync)


def _fsync_path(path: str) -> None:
    _sync_path(path, os.fsync)


def fsync_dir(path: str) -> None:
    _sync_path(path, os.fsync, os.O_RDONLY | os.O_DIRECTORY)


def os_error_to_wire(err: OSError) -> WireError:
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return WireError("disk-full", f"the disk is full; nothing was written ({err.strerror})")
    return WireError("io-error", f"the disk refused the write; nothing was written ({err})")


def encode_event(ev: Event, seq: int, ts: int) -> tuple[bytes, dict]:
    """One log line and its record: seq, ts, kind first (msgspec alone would put the tag
    first and the base fields last), so lines read well and the log is searchable by
    byte offset."""
    ev.seq, ev.ts = seq, ts
    fields = msgspec.to_builtins(ev)
    record = {"seq": seq, "ts": ts, "kind": fields.pop("kind")}
    record.update((k, v) for k, v in fields.items() if k not in ("seq", "ts"))
    return _encoder.encode(record) + b"\n", record


class Op:
    """A unit of durable work. Subclasses override the phases they need."""

    error: WireError | None = None
    result: object = None

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.done = trio.Event()

    async def wait(self):
        """The op's result once its batch is durable, or its error raised."""
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result

    staged: tuple[str, ...] = ()  # files prepare wrote, to be made durable before place

    def check(self, ctx: "Committer") -> None:
        """On the loop, before the batch goes to the worker: lookups in the index.
        Raise WireError to fail the op."""

    def prepare(self, ctx: "Committer") -> None:
        """Stage files (runs in the worker thread), listing them in `staged`; they are
        made durable together afterwards. Raise WireError/OSError to fail."""

    def place(self, ctx: "Committer") -> set[str]:
        """Move staged files into place; return the directories to fsync."""
        return set()

    def rollback(self, ctx: "Committer") -> None:
        """Undo place (the log append failed)."""

    def index(self, idx: Index) -> None:
        """Apply the op to the index (on the loop, inside the open transaction)."""

    def discard(self, ctx: "Committer") -> None:
        """Remove what prepare staged (the op failed)."""

    def finish(self) -> None:
        """After the batch, on the event loop: settle answers that depend on other ops."""


class EventOp(Op):
    """Only events: e.g. session/spawned, agent/woken."""

    def __init__(self, *events: Event):
        super().__init__()
        self.events = list(events)


class Committer:
    def __init__(
        self, eventlog: EventLog, index: Index, publish: Callable[[list[dict]], None], root: str
    ):
        self.eventlog = eventlog
        self.flusher = Flusher()
        self.index = index
        self._publish = publish
        self._pending: list[Op] = []
        self._wakeup = trio.Event()
        self.closed = False
        self.on_lost: Callable | None = None  # told about events record() could not write
        self._committing = trio.Lock()  # held while a batch commits; drain() waits on it

    def enqueue(self, op: Op) -> None:
        """Queue the op for the next batch; `await op.wait()` for its answer."""
        if self.closed:
            raise WireError("shutting-down", "the daemon is stopping")
        self._pending.append(op)
        self._wakeup.set()

    async def submit(self, op: Op):
        """Queue the op, wait until its batch is durable; return its result or raise."""
        self.enqueue(op)
        return await op.wait()

    async def record(self, *events: Event) -> bool:
        """Log events that no client is waiting on (a wake, an exit). Never raises: a
        disk that refuses the log must not take a background task, or the daemon, down.
        Returns whether the events were written."""
        try:
            await self.submit(EventOp(*events))
            return True
        except WireError as err:
            if self.on_lost is not None:
                self.on_lost(events, err)
            return False

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if self.index.pending.ops or self.index.pending.meta:
                # Index changes not yet committed: commit them once they are
                # INDEX_COMMIT_S old (and past any retry backoff), unless work comes first.
                wait = max(
                    self.index.retry_at - time.monotonic(),
                    self.index.pending.since + INDEX_COMMIT_S - time.monotonic(),
                    0.0,
                )
                with trio.move_on_after(wait):
                    await self._wakeup.wait()
                if not self._wakeup.is_set():
                    self.commit_index()
                    continue
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                await self._commit(batch)
                if self.index.due(INDEX_COMMIT_S):
                    self.commit_index()

    async def drain(self) -> None:
        """Commit whatever is waiting now, the index too (used at shutdown)."""
        async with self._committing:  # a batch in flight finishes first
            pass
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            await self._commit(batch)
        self.commit_index()

    def commit_index(self) -> None:
        """Commit the index changes of the batches since the last commit. A failure keeps
        them in memory (reads still see them) and is retried with backoff; one that
        persists, or corruption, rebuilds the index from the files."""
        idx = self.index
        if not idx.flush() and idx.needs_rebuild:
            idx.recover_now(f"the index could not be written: {idx.last_error}")

    def _apply_index(self, ops: list[Op]) -> None:
        # In memory (Index.pending): cannot fail for SQLite's reasons, so what is answered
        # is listed and deduplicated from now on.
        for op in ops:
            op.index(self.index)
        self.index.set_meta("last_seq", str(self.eventlog.last_seq))

    async def _commit(self, batch: list[Op]) -> None:
        async with self._committing:
            try:
                await self._commit_batch(batch)
            except Exception as err:  # noqa: BLE001 - answer every op; keep committing
                for op in batch:
                    if not op.done.is_set():
                        op.error = op.error or WireError("internal", f"the commit failed: {err!r}")
                        op.done.set()

    async def _commit_batch(self, batch: list[Op]) -> None:
        self._batch_keys: dict = {}  # idempotency keys claimed earlier in this batch
        for op in batch:
            try:
                op.check(self)
            except Exception as err:  # noqa: BLE001 - every failure becomes that op's answer
                self._fail(op, err)
        batch_live = [op for op in batch if op.error is None]
        if not batch_live:
            published: list[Op] = []
            records: list[dict] = []
        elif len(batch_live) == 1:
            # A lone op: the thread hand-off would cost more than it frees; whatever
            # arrives meanwhile waits in the socket buffers and forms the next batch.
            published, records = self._commit_sync(batch_live)
        else:
            # Many: flush in a worker so the loop reads the next batch meanwhile.
            published, records = await trio.to_thread.run_sync(self._commit_sync, batch_live)
        if published:
            self._apply_index(published)
        if records:
            self.eventlog.published_seq = records[-1]["seq"]
            self._publish(records)
        for op in batch:
            op.finish()
            op.done.set()

    def _commit_sync(self, batch: list[Op]) -> tuple[list[Op], list[dict]]:
        """Steps 1-3; returns the published ops and their event records."""
        live: list[Op] = []
        for op in batch:
            try:
                op.prepare(self)
                live.append(op)
            except Exception as err:  # noqa: BLE001 - every failure becomes that op's answer
                self._fail(op, err)
        if live:
            try:
                self.flusher.flush(files=[p for op in live for p in op.staged])
            except OSError as err:
                for op in live:
                    self._fail(op, err)
                live = []
        dirs: set[str] = set()
        published: list[Op] = []
        for op in live:
            try:
                dirs |= op.place(self)
                published.append(op)
            except Exception as err:  # noqa: BLE001
                self._fail(op, err)
        try:
            lines, records, seq = self._encode_events(published)
            if dirs and lines:
                # The renames (directory entries) and the log append, made durable together.
                self.eventlog.append(
                    lines, flush=lambda: self.flusher.flush(dirs=dirs, fds=[self.eventlog.fd])
                )
            elif dirs:
                self.flusher.flush(dirs=dirs)  # e.g. a wake's retirement
            else:
                self.eventlog.append(lines)
            self.eventlog.last_seq = seq
        except Exception as err:  # noqa: BLE001
            for op in published:
                try:
                    op.rollback(self)
                except Exception:  # noqa: BLE001 - best effort; the op already failed
                    pass
                self._fail(op, err)
            return [], []
        return published, records

    def _fail(self, op: Op, err: Exception) -> None:
        if isinstance(err, WireError):
            op.error = err
        elif isinstance(err, OSError):
            op.error = os_error_to_wire(err)
        else:
            op.error = WireError("internal", f"the write failed: {err!r}")
        try:
            op.discard(self)
        except Exception:  # noqa: BLE001
            pass

    def _encode_events(self, ops: list[Op]) -> tuple[list[bytes], list[dict], int]:
        lines: list[bytes] = []
        records: list[dict] = []
        seq = self.eventlog.last_seq
        ts = now_ms()
        for op in ops:
            for ev in op.events:
                seq += 1
                line, record = encode_event(ev, seq, ts)
                lines.append(line)
                records.append(record)
        return lines, records, seq
