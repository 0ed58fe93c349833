"""Receipts for mail from other nodes (benchd.runtime.tracking): which events make one,
for which node, and the bound on what waits for the bridge. A real index file."""

import trio
import trio.testing

from bench_wire import messages as m
from benchd.runtime import tracking as rc
from benchd.runtime.tracking import Receipts
from benchd.store.index import Index


class _Log:
    def __init__(self) -> None:
        self.said: list[str] = []

    def warning(self, event: str, **kw: object) -> None:
        self.said.append(event)


def _delivered(local: str, origin_id: str, origin: str = "node1") -> m.BridgeDelivered:
    return m.BridgeDelivered(
        seq=1, ts=1000, mail_id=local, sender=f"alice@{origin}", to="bob", key="k",
        origin=origin, origin_id=origin_id,
    )  # fmt: skip


def test_delivered_then_read_or_woken_make_receipts_for_the_origin(tmp_path):
    r = Receipts(Index(str(tmp_path / "index.sqlite")), "node2", _Log())
    r.on_event(_delivered("20261201T000001.000Z-0001", "20261201T000000.000Z-0007"))
    r.on_event(_delivered("20261201T000001.000Z-0002", "20261201T000000.000Z-0008"))
    r.on_event(
        m.MailReadEvent(seq=2, ts=2000, mail_id="20261201T000001.000Z-0001", handle="bob",
                        reader="operator", path="/nowhere")
    )  # fmt: skip
    r.on_event(
        m.AgentWoken(seq=3, ts=3000, session="s1", handle="bob",
                     mail_id="20261201T000001.000Z-0002", path=None)
    )  # fmt: skip
    # Local mail (no origin) and a second read of the same copy make none.
    r.on_event(
        m.MailReadEvent(seq=4, ts=4000, mail_id="20261201T000001.000Z-0001", handle="bob",
                        reader="operator", path="/nowhere")
    )  # fmt: skip
    got = trio.run(r.pull, 256, 0.0)
    assert [(x.node, x.mail_id, x.state, x.at, x.by) for x in got] == [
        ("node1", "20261201T000000.000Z-0007", "delivered", 1000, ""),
        ("node1", "20261201T000000.000Z-0008", "delivered", 1000, ""),
        ("node1", "20261201T000000.000Z-0007", "read", 2000, "read"),
        ("node1", "20261201T000000.000Z-0008", "read", 3000, "wake"),
    ]
    assert trio.run(r.pull, 256, 0.0) == []  # pulled is the bridge's


def test_the_queue_is_bounded_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(rc, "QUEUE_MAX", 3)
    log = _Log()
    r = Receipts(Index(str(tmp_path / "index.sqlite")), "node2", log)
    for i in range(5):
        r.on_event(_delivered(f"20261201T000001.000Z-000{i}", f"20261201T000000.000Z-000{i}"))
    got = trio.run(r.pull, 256, 0.0)
    assert [x.mail_id[-1] for x in got] == ["2", "3", "4"]  # the oldest dropped first
    assert r.dropped == 2 and log.said == ["receipts dropped: the bridge is not taking them"]


def test_a_pull_waits_for_a_receipt_and_returns_it(tmp_path):
    r = Receipts(Index(str(tmp_path / "index.sqlite")), "node2", _Log())

    async def scenario() -> list[m.Receipt]:
        async with trio.open_nursery() as n:
            got: list[m.Receipt] = []

            async def puller() -> None:
                got.extend(await r.pull(10, 30.0))

            n.start_soon(puller)
            await trio.testing.wait_all_tasks_blocked()
            r.on_event(_delivered("20261201T000001.000Z-0001", "20261201T000000.000Z-0001"))
        return got

    assert [x.state for x in trio.run(scenario)] == ["delivered"]
