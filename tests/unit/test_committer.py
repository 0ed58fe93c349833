"""The committer's batching, driven through a fake store port (no journal, no files).

The real store (JournalStore: the event log and the journal) is exercised end to end by
the conformance and reliability tests (tests/reliability/test_crash.py and friends);
here only the batching decides: what forms a batch, who is answered with what, what is
published and indexed, and that a failure never stops the committer.
"""

import trio

from bench_wire.errors import WireError
from bench_wire.messages import DaemonStarted
from benchd.runtime.committer import MAX_BATCH, Batch, Committer, Op
from benchd.store.index import Index


class FakeStore:
    """Records each batch it is asked to write; numbers the ops' events like the log."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.batches: list[list[str]] = []
        self.published_seq = 0
        self.fail: Exception | None = None
        self.closed = False

    def write(self, batch: Batch, ops: list[Op]):
        self.batches.append([op.name for op in ops])
        records = []
        seq = self.last_seq
        for op in ops:
            op.prepare(batch)
            for _ev in op.events:
                seq += 1
                records.append({"seq": seq, "kind": "daemon/started", "op": op.name})
        if self.fail is not None:  # an unexpected failure: the committer answers `internal`
            raise self.fail
        self.last_seq = seq
        for op in ops:
            op.result = f"done {op.name}"
        return list(ops), records, [ev for op in ops for ev in op.events]

    def published(self, seq: int) -> None:
        self.published_seq = seq

    def close(self) -> bool:
        self.closed = True
        return True


class NamedOp(Op):
    def __init__(self, name: str, refuse: bool = False):
        super().__init__()
        self.name, self.refuse = name, refuse
        self.events = [DaemonStarted(pid=1, version="t")]
        self.indexed = False

    def check(self, ctx) -> None:
        if self.refuse:
            raise WireError("bad-key", f"{self.name} refused")

    def index(self, idx) -> None:
        self.indexed = True


def _run(tmp_path, scenario):
    store = FakeStore()
    published: list[list[dict]] = []
    index = Index(str(tmp_path / "index.sqlite"))
    committer = Committer(store, index, lambda records, _events: published.append(records))

    async def outer():
        async with trio.open_nursery() as nursery:
            await nursery.start(committer.run)
            await scenario(committer)
            await committer.drain()
            nursery.cancel_scope.cancel()

    trio.run(outer)
    index.close()
    return store, published, index


def test_ops_waiting_together_are_one_batch_and_each_gets_its_answer(tmp_path):
    answers = {}

    async def scenario(c):
        ops = [NamedOp(f"op{i}") for i in range(5)]
        for op in ops:
            c.enqueue(op)  # all queued before the committer looks
        for op in ops:
            answers[op.name] = await op.wait()
        assert all(op.indexed for op in ops)

    store, published, _ = _run(tmp_path, scenario)
    assert store.batches == [[f"op{i}" for i in range(5)]]
    assert answers == {f"op{i}": f"done op{i}" for i in range(5)}
    assert [r["seq"] for r in published[0]] == [1, 2, 3, 4, 5]
    assert store.published_seq == 5


def test_an_op_refused_by_its_check_never_reaches_the_store(tmp_path):
    got = {}

    async def scenario(c):
        good, bad = NamedOp("good"), NamedOp("bad", refuse=True)
        c.enqueue(good)
        c.enqueue(bad)
        got["good"] = await good.wait()
        try:
            await bad.wait()
        except WireError as err:
            got["bad"] = err.code
        assert not bad.indexed

    store, published, _ = _run(tmp_path, scenario)
    assert store.batches == [["good"]]
    assert got == {"good": "done good", "bad": "bad-key"}
    assert [r["op"] for r in published[0]] == ["good"]


def test_a_long_queue_is_cut_into_batches_of_max_batch(tmp_path):
    async def scenario(c):
        ops = [NamedOp(f"op{i}") for i in range(MAX_BATCH + 3)]
        for op in ops:
            c.enqueue(op)
        for op in ops:
            await op.wait()

    store, _, _ = _run(tmp_path, scenario)
    assert [len(b) for b in store.batches] == [MAX_BATCH, 3]


def test_a_store_failure_answers_the_batch_and_the_committer_goes_on(tmp_path):
    got = []

    async def scenario(c):
        c.store.fail = OSError(5, "I/O error")
        first = NamedOp("first")
        c.enqueue(first)
        try:
            await first.wait()
        except WireError as err:
            got.append(err.code)
        c.store.fail = None
        got.append(await c.submit(NamedOp("second")))

    store, published, _ = _run(tmp_path, scenario)
    assert got == ["internal", "done second"]
    assert store.batches == [["first"], ["second"]]
    assert [r["op"] for batch in published for r in batch] == ["second"]


def test_record_never_raises_and_reports_what_it_could_not_write(tmp_path):
    lost = []

    async def scenario(c):
        c.on_lost = lambda events, err: lost.append(err.code)
        c.store.fail = OSError(28, "No space left on device")
        assert await c.record(DaemonStarted(pid=1, version="t")) is False
        c.store.fail = None
        c.closed = True
        assert await c.record(DaemonStarted(pid=1, version="t")) is False  # stopping

    store, _, _ = _run(tmp_path, scenario)
    assert lost == ["internal", "shutting-down"]


def test_close_is_the_stores_clean_stop(tmp_path):
    async def scenario(c):
        assert c.close() is True

    store, _, _ = _run(tmp_path, scenario)
    assert store.closed
