"""Exactly once across nodes: kill -9 of either bridge mid-stream, and a restart of
nats-server on its store mid-burst. Every acknowledged message lands in the far mailbox
exactly once (run with -s to see the figures)."""

import asyncio
import os
import signal
import threading

import pytest

from benchd.core import frontmatter
from tests.conftest import wait_for
from tests.nodes import NatsServer, Node, have_bridge, wait_known

pytestmark = [
    pytest.mark.slow,  # kills and restarts bridges and a NATS server
    pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge())),
]


@pytest.fixture
def rig():
    nats = NatsServer()
    nats.start()
    n1, n2 = Node("node1", nats).start(), Node("node2", nats).start()
    try:
        n1.start_bridge()
        n2.start_bridge()
        wait_known(n1, n2)
        yield nats, n1, n2
    finally:
        print(n1.bridge_output()[-2000:], n2.bridge_output()[-2000:])
        n1.close()
        n2.close()
        nats.close()


def send_all(node: Node, keys: list[str], senders: int = 4) -> list[dict]:
    """Send one message per key to bob@node2 from `senders` threads; the answers."""
    answers: list[dict] = []
    lock = threading.Lock()

    def work(part):
        with node.d.connect() as c:
            for k in part:
                c.send({"verb": "mail/send", "to": "bob@node2", "body": f"body {k}", "key": k})
                a = c.recv()
                assert a["ok"], a
                with lock:
                    answers.append(a)

    threads = [threading.Thread(target=work, args=(keys[i::senders],)) for i in range(senders)]
    for t in threads:
        t.start()
    return threads, answers


def count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except FileNotFoundError:
        return 0


def forwarded(n: Node) -> int:
    return count(os.path.join(n.dir, "mail", "@outbound", "read"))


def delivered(n: Node) -> int:
    return count(os.path.join(n.dir, "mail", "bob", "inbox"))


def keys_in(n: Node) -> list[str]:
    out = []
    d = os.path.join(n.dir, "mail", "bob", "inbox")
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            out.append(frontmatter.parse(f.read())[0]["key"])
    return out


def jetstream_figures(url: str) -> dict:
    import nats as nats_py

    async def go():
        nc = await nats_py.connect(url)
        js = nc.jetstream()
        si = await js.stream_info("BENCH_MAIL")
        ci = await js.consumer_info("BENCH_MAIL", "bench-node2")
        await nc.close()
        return {
            "stored": si.state.last_seq,
            "left": si.state.messages,
            "deliveries": ci.delivered.consumer_seq,
            "redelivered": ci.num_redelivered,
            "ack_pending": ci.num_ack_pending,
            "pending": ci.num_pending,
        }

    return asyncio.run(go())


class ReceiptCount:
    """Counts the receipt messages the bridges publish (they share the mail stream), from
    a plain NATS subscription on their subjects, so the mail stored can be told apart."""

    SUBJECT = "bench.mail.*.*.@receipts"

    def __init__(self, url: str):
        self.url, self.n = url, 0
        self.ready, self.done = threading.Event(), None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "the receipt counter did not subscribe"

    async def _run(self) -> None:
        import nats as nats_py

        nc = await nats_py.connect(self.url)
        self.done = asyncio.Event()
        self.loop = asyncio.get_running_loop()

        async def seen(msg) -> None:
            self.n += 1

        await nc.subscribe(self.SUBJECT, cb=seen)
        await nc.flush()
        self.ready.set()
        await self.done.wait()
        await nc.flush()
        await nc.close()

    def stop(self) -> int:
        self.loop.call_soon_threadsafe(self.done.set)
        self.thread.join(30)
        return self.n


def settle(nats: NatsServer, n1: Node, n2: Node, total: int) -> dict:
    """Wait until all arrived and JetStream holds nothing unacked; the figures."""
    wait_for(lambda: delivered(n2) >= total, 120, f"{total} messages in bob's inbox")
    wait_for(
        lambda: (f := jetstream_figures(nats.url))["ack_pending"] == 0 and f["pending"] == 0 and f,
        60,
        "JetStream to hold nothing unacked",
    )
    wait_for(lambda: n1.status()["bridge"]["queued"] == 0, 30, "node1's queue to drain")
    return jetstream_figures(nats.url)


def republished(*nodes: Node) -> int:
    """Messages the sending bridges published again that JetStream already had."""
    n = 0
    for node in nodes:
        for line in node.bridge_output().splitlines():
            if "were already in the stream" in line:
                n += int(line.split("bench bridge: ", 1)[1].split()[0])
    return n


def check_exactly_once(n2: Node, keys: list[str], answers: list[dict]) -> None:
    assert len(answers) == len(keys)
    got = keys_in(n2)
    assert len(got) == len(keys), f"{len(got)} files for {len(keys)} messages"
    assert sorted(got) == sorted(keys)


def test_kill9_of_each_bridge_mid_stream_1000_messages(rig):
    nats, n1, n2 = rig
    keys = [f"k-{i:04d}" for i in range(1000)]
    receipts = ReceiptCount(nats.url)
    threads, answers = send_all(n1, keys)
    kills = []
    # Three kills of each bridge, alternating, while the burst is in flight: the sending
    # bridge between pulls, PubAcks and its forwarded mark; the receiving one between
    # fetches, delivers and acks.
    for at in (150, 300, 450):
        wait_for(lambda a=at: forwarded(n1) >= a, 120, f"{at} forwarded")
        n1.kill_bridge(signal.SIGKILL)
        kills.append(("sending", forwarded(n1)))
        n1.start_bridge()
        wait_for(lambda a=at: delivered(n2) >= a + 100, 120, f"{at + 100} delivered")
        n2.kill_bridge(signal.SIGKILL)
        kills.append(("receiving", delivered(n2)))
        n2.start_bridge()
    for t in threads:
        t.join(120)
    figures = settle(nats, n1, n2, len(keys))
    # Receipts go back to node1 as node2 delivers (and they end with its last delivery).
    wait_for(lambda: jetstream_figures(nats.url)["left"] == 0, 60, "receipts consumed")
    figures = jetstream_figures(nats.url)
    figures["receipts"] = receipts.stop()
    check_exactly_once(n2, keys, answers)
    print(
        f"\nbridge kill -9: acknowledged {len(answers)}, in bob's inbox {delivered(n2)}, "
        f"distinct keys {len(set(keys_in(n2)))}; kills at {kills}; republished and "
        f"deduplicated by JetStream {republished(n1)}; JetStream stored "
        f"{figures['stored']}, deliveries {figures['deliveries']} "
        f"(redelivered {figures['redelivered']})"
    )
    # A republish after a kill was deduplicated: the stream stored each message once
    # (beside the receipts node2 sent back).
    assert figures["stored"] - figures["receipts"] == len(keys)


def test_nats_server_restart_on_its_store_mid_burst(rig):
    nats, n1, n2 = rig
    keys = [f"r-{i:04d}" for i in range(500)]
    threads, answers = send_all(n1, keys)
    wait_for(lambda: forwarded(n1) >= 100, 120, "100 forwarded")
    nats.stop()
    stopped_at = forwarded(n1), delivered(n2)
    nats.start()
    for t in threads:
        t.join(120)
    figures = settle(nats, n1, n2, len(keys))
    check_exactly_once(n2, keys, answers)
    retries = len(n1.d.events(kind="bridge/retry")) + len(n2.d.events(kind="bridge/retry"))
    print(
        f"\nnats-server restart: acknowledged {len(answers)}, in bob's inbox "
        f"{delivered(n2)}; stopped at {stopped_at[0]} forwarded / {stopped_at[1]} "
        f"delivered; bridge/retry events {retries}; republished and deduplicated "
        f"{republished(n1)}; JetStream stored {figures['stored']}, "
        f"deliveries {figures['deliveries']}"
    )
