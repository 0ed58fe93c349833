"""The bridge's pull-request bookkeeping (bench_bridge.natsside.Consumer), with a stand-in for the
NATS connection that records the requests sent. The real wiring (a real nats-server,
its restarts, kill -9 of the bridges) is exercised by tests/conformance/test_bridge.py
and tests/reliability/test_bridge_kill.py."""

import asyncio
import json

import pytest

from tests.nodes import have_bridge

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))


class Recorder:
    """Stands in for nats.aio.client.Client: the consumer only publishes requests."""

    def __init__(self):
        self.requests: list[dict] = []

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def publish(self, subject, payload, reply=""):
        assert subject == "$JS.API.CONSUMER.MSG.NEXT.BENCH_MAIL.bench-node2"
        assert reply == "_INBOX.test"
        self.requests.append(json.loads(payload))


def consumer():
    from bench_bridge.natsside import Consumer

    nc = Recorder()
    c = Consumer(nc, None, "node2", 30.0)
    return c, nc


def mail(c, n: int):
    from nats.aio.msg import Msg

    return Msg(c.nc, subject="bench.mail.node2.bob", reply=f"$JS.ACK.{n}", data=b"{}")


def status(c, code: str, description: str = "", pending: int | None = None):
    from nats.aio.msg import Msg

    headers = {"Status": code, "Description": description}
    if pending is not None:
        headers["Nats-Pending-Messages"] = str(pending)
    return Msg(c.nc, subject=c.inbox, headers=headers)


def test_a_request_is_open_before_the_first_message_and_topped_up_at_half():
    from bench_bridge.natsside import BATCH

    async def go():
        c, nc = consumer()
        waiter = asyncio.create_task(c.take(10))
        await asyncio.sleep(0)
        assert len(nc.requests) == 1
        assert nc.requests[0]["batch"] == BATCH
        assert nc.requests[0]["idle_heartbeat"] > 0 and nc.requests[0]["expires"] > 0
        for n in range(3):
            await c._on_msg(mail(c, n))
        got = await waiter
        assert [m.reply for m in got] == ["$JS.ACK.0", "$JS.ACK.1", "$JS.ACK.2"]
        assert len(nc.requests) == 1  # plenty owed still
        for n in range(3, BATCH // 2 + 1):
            await c._on_msg(mail(c, n))
        await c.take(BATCH)
        assert len(nc.requests) == 2  # half the batch came: the next request is already out
        assert c.owed == BATCH + BATCH // 2 - 1

    asyncio.run(go())


def test_heartbeats_keep_a_request_and_an_expiry_gives_back_what_it_did_not_bring():
    from bench_bridge.natsside import BATCH

    async def go():
        c, nc = consumer()
        await c._top_up()
        await c._on_msg(status(c, "100", "Idle Heartbeat"))
        assert c.owed == BATCH and not c.ready
        await c._on_msg(status(c, "408", "Request Timeout", pending=BATCH))
        assert c.owed == 0
        waiter = asyncio.create_task(c.take(1))
        await asyncio.sleep(0)
        assert len(nc.requests) == 2  # asked again
        await c._on_msg(mail(c, 1))
        assert len(await waiter) == 1

    asyncio.run(go())


def test_a_request_the_server_lost_is_sent_again_after_three_silent_heartbeats():
    from bench_bridge.natsside import HEARTBEAT_S

    async def go():
        c, nc = consumer()
        await c._top_up()
        c.heard -= 3 * HEARTBEAT_S + 0.1  # nothing heard: nats-server restarted
        waiter = asyncio.create_task(c.take(1))
        await asyncio.sleep(0)
        assert len(nc.requests) == 2
        await c._on_msg(mail(c, 1))
        assert len(await waiter) == 1

    asyncio.run(go())


@pytest.mark.parametrize(
    "code,description",
    [("503", "No Responders"), ("409", "Consumer Deleted")],
)
def test_a_refusal_is_raised_to_the_caller(code, description):
    from bench_bridge.natsside import ConsumerTrouble

    async def go():
        c, nc = consumer()
        waiter = asyncio.create_task(c.take(1))
        await asyncio.sleep(0)
        await c._on_msg(status(c, code, description))
        with pytest.raises(ConsumerTrouble):
            await waiter

    asyncio.run(go())
