"""The bridge's publishing window (bench_bridge.forwarding.Forwarding), with stand-ins for the
daemon (the outbound queue) and JetStream (PubAcks answered by the test). The real wiring
(a real nats-server, its restarts, kill -9 of the bridges) is exercised by
tests/conformance/test_bridge.py and tests/reliability/test_bridge_kill.py."""

import asyncio

import pytest

from tests.nodes import have_bridge

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))

DEADLINE = 10.0


def mail(i: int):
    from bench_wire import messages as m

    return m.RemoteMail(
        mail_id=f"20261201T000000.000Z-{i:04d}",
        sender="al@node1",
        to="bob@node2",
        key=f"k{i}",
        body="hi",
        date="2026-12-01T00:00:00.000Z",
    )


class Queue:
    """The daemon's outbound queue: bridge/pull after a cursor, at most `limit`."""

    def __init__(self, n: int):
        self.mails = [mail(i) for i in range(n)]
        self.limits: list[int] = []

    async def call(self, req):
        from bench_wire import messages as m

        assert isinstance(req, m.BridgePull)
        self.limits.append(req.limit)
        after = [x for x in self.mails if req.after is None or x.mail_id > req.after]
        if not after:
            await asyncio.Event().wait()  # a long poll with nothing queued: never answered
        return m.PullOk(messages=after[: req.limit])


class Bridge:
    """What Forwarding uses of the Bridge: its publish window and publish_async."""

    def __init__(self, window: int):
        self.window = window
        self.published: list[tuple[str, asyncio.Future]] = []
        self.changed = asyncio.Event()

    async def _publish_async(self, x):
        fut = asyncio.get_running_loop().create_future()
        self.published.append((x.mail_id, fut))
        self.changed.set()
        return fut


def ack(fut, duplicate=False):
    from nats.js import api

    fut.set_result(api.PubAck(stream="BENCH_MAIL", seq=1, duplicate=duplicate))


async def quiesce() -> None:
    """Let every ready task run until it waits (the stand-ins do no I/O: no timing)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def until(b: Bridge, cond, what: str) -> None:
    """Wait (with a deadline) until `cond` holds; it is checked after each publish."""
    async with asyncio.timeout(DEADLINE):
        while not cond():
            b.changed.clear()
            await b.changed.wait()
    assert cond(), what


def test_the_window_bounds_what_awaits_a_puback_and_marks_follow_the_queue_order():
    from bench_bridge.forwarding import Forwarding

    async def go():
        b, q, marks = Bridge(window=8), Queue(20), asyncio.Queue()
        run = Forwarding(b._publish_async, b.window, q, marks, None)
        tasks = [asyncio.create_task(run.pull()), asyncio.create_task(run.settle())]
        await until(b, lambda: len(b.published) == 8, "a window's worth published")
        await quiesce()
        assert len(b.published) == 8 and run.full  # no more until a PubAck comes back
        # PubAcks out of order: only the acknowledged prefix is marked.
        ack(b.published[1][1])
        await quiesce()
        assert marks.empty() and run.cursor is None
        ack(b.published[0][1])
        got = await asyncio.wait_for(marks.get(), DEADLINE)
        assert got == [mail(0).mail_id, mail(1).mail_id]
        assert run.cursor == mail(1).mail_id
        await until(b, lambda: len(b.published) == 10, "the window refilled")
        done: list[str] = []
        async with asyncio.timeout(DEADLINE):
            while len(done) < 18:  # the rest, each acknowledged once published
                for _, fut in b.published:
                    if not fut.done():
                        ack(fut)
                try:
                    done += await asyncio.wait_for(marks.get(), 0.01)
                except TimeoutError:
                    pass  # more published meanwhile: acknowledged on the next turn
        assert done == [x.mail_id for x in q.mails[2:]]
        assert len(b.published) == 20  # each published once
        assert max(q.limits) <= 8
        for t in tasks:
            t.cancel()

    asyncio.run(go())


def test_a_failed_publish_ends_the_spell_at_the_last_acknowledged_message():
    from nats.errors import TimeoutError as NatsTimeout

    from bench_bridge.forwarding import Forwarding

    async def go():
        b, q, marks = Bridge(window=4), Queue(6), asyncio.Queue()
        run = Forwarding(b._publish_async, b.window, q, marks, None)
        settle = asyncio.create_task(run.settle())
        pull = asyncio.create_task(run.pull())
        await until(b, lambda: len(b.published) == 4, "the window published")
        ack(b.published[0][1])
        b.published[1][1].set_exception(NatsTimeout())
        ack(b.published[2][1])
        with pytest.raises(NatsTimeout):
            await asyncio.wait_for(settle, DEADLINE)
        pull.cancel()
        assert await asyncio.wait_for(marks.get(), DEADLINE) == [mail(0).mail_id]
        assert run.cursor == mail(0).mail_id  # the next spell republishes from mail 1
        waiting = [fut for _, fut in b.published if not fut.done()]
        run.abandon()
        assert all(fut.cancelled() for fut in waiting) and not run.window

    asyncio.run(go())


def test_a_puback_that_never_comes_fails_the_spell(monkeypatch):
    from bench_bridge import forwarding
    from bench_bridge.forwarding import Forwarding

    monkeypatch.setattr(forwarding, "PUBACK_WAIT_S", 0.05)

    async def go():
        b, q, marks = Bridge(window=4), Queue(2), asyncio.Queue()
        run = Forwarding(b._publish_async, b.window, q, marks, None)
        pull = asyncio.create_task(run.pull())
        await until(b, lambda: len(b.published) == 2, "both published")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run.settle(), DEADLINE)
        pull.cancel()
        assert marks.empty() and run.cursor is None

    asyncio.run(go())
