"""Mail between nodes that holds up in real use: quiet spells, a directory anyone with
NATS access can write to, two daemons with one name, and refusals returned to their
senders. Real daemons, real `bench bridge` processes, a real `nats-server -js`."""

import asyncio
import json
import os
import signal
import subprocess
import time

import msgspec
import pytest

from bench_wire import messages as m
from tests.conformance.test_bridge import mailbox, wait_for
from tests.conformance.test_bridge import nats as nats  # noqa: F401 - the fixture
from tests.conformance.test_bridge import nodes as nodes  # noqa: F401 - the fixture
from tests.conformance.test_bridge import pair as pair  # noqa: F401 - the fixture
from tests.conformance.test_bridge import pytestmark as pytestmark  # noqa: F401 - skip reason
from tests.nodes import BENCH, NatsServer, Node, wait_known


def _raw(url: str, work):
    """Run `work(js, nc)` with a plain nats-py client: what anyone with NATS access can do."""
    import nats as nats_py

    async def go():
        nc = await nats_py.connect(url)
        try:
            return await work(nc.jetstream(), nc)
        finally:
            await nc.close()

    return asyncio.run(go())


def _idle_closes(node: Node, pid: int) -> int:
    """How many of the daemon's connections from `pid` it closed as idle (benchd.log)."""
    try:
        with open(os.path.join(node.dir, "benchd.log")) as f:
            lines = [json.loads(x) for x in f if "connection idle timeout" in x]
    except OSError:
        return 0
    return sum(x.get("pid") == pid for x in lines)


def test_a_quiet_spell_longer_than_the_idle_timeout_does_not_stall_or_restart(nats):
    n1 = Node("node1", nats, "--idle-timeout", "1").start()
    n2 = Node("node2", nats, "--idle-timeout", "1").start()
    try:
        n1.start_bridge()
        n2.start_bridge()
        wait_known(n1, n2)
        n1.send("bob@node2", "warm")
        wait_for(lambda: len(mailbox(n2, "bob")) == 1, 30, "the warm message")
        assert n1.bridge is not None and n2.bridge is not None
        pids = (n1.bridge.pid, n2.bridge.pid)
        # The quiet spell: both daemons have closed a bridge connection that had
        # nothing to say (node1's marks, node2's deliveries) for longer than the timeout.
        wait_for(lambda: _idle_closes(n1, pids[0]) >= 1, 60, "node1 to close an idle one")
        wait_for(lambda: _idle_closes(n2, pids[1]) >= 1, 60, "node2 to close an idle one")
        n1.send("bob@node2", "after the quiet")
        wait_for(lambda: len(mailbox(n2, "bob")) == 2, 30, "the message after the quiet")
        # Crossed by the same bridge processes: reconnected inside, not restarted.
        assert n1.bridge.poll() is None and n2.bridge.poll() is None
        assert (n1.bridge.pid, n2.bridge.pid) == pids
        for n in (n1, n2):
            assert "no-daemon" not in n.bridge_output(), n.bridge_output()
        # node1 learnt it was forwarded on the same connection machinery: nothing queued.
        wait_for(lambda: n1.status()["bridge"]["queued"] == 0, 30, "node1's queue to empty")
    finally:
        n1.close()
        n2.close()


def _entries(n: Node) -> dict[str, dict]:
    return {x["node"]: x for x in n.nodes()["nodes"]}


def test_poisoned_directory_entries_are_skipped_and_mail_still_crosses(pair, nats):
    n1, n2 = pair
    pids = (n1.bridge.pid, n2.bridge.pid)
    now_ms = int(time.time() * 1000)
    ten_years = 10 * 365 * 86400 * 1000
    big = json.dumps({"node": "big1", "seen_ms": now_ms, "handles": ["x" * 60] * 14000})

    import nats as nats_py

    async def poison(js, _nc):
        kv = await js.key_value("BENCH_NODES")
        await kv.put("evil1", b'{"node":"evil1","seen_ms":1,"handles":[1,2,{}]}')
        await kv.put("evil2", b'{"node":5,"seen_ms":1}')
        await kv.put("evil3", b"not json at all")
        await kv.put("evil4", json.dumps({"node": "node1", "seen_ms": now_ms}).encode())
        await kv.put(
            "many",
            json.dumps(
                {"node": "many", "seen_ms": now_ms, "handles": [f"h{i}" for i in range(600)]}
            ).encode(),
        )
        for i in range(1, 4):  # about 2.5 MB of entries: over the bucket's message cap
            with pytest.raises(nats_py.errors.Error, match="maximum"):
                await kv.put(f"big{i}", big.replace("big1", f"big{i}").encode())
        await kv.put(
            "future",
            json.dumps(
                {"node": "future", "seen_ms": now_ms + ten_years, "handles": ["fay"]}
            ).encode(),
        )
        await kv.put("ghost", json.dumps({"node": "ghost", "seen_ms": now_ms}).encode())

    _raw(nats.url, poison)
    wait_for(lambda: "ghost" in _entries(n1) and "future" in _entries(n1), 30, "the good ones")
    # Each bad entry is skipped with its reason, once; the good ones are listed.
    codes = sorted(e["code"] for e in n1.d.events(kind="bridge/skipped"))
    assert codes == ["bad-entry"] * 4 + ["too-many-handles"], codes
    listed = _entries(n1)
    assert set(listed) == {"node2", "ghost", "future"}, listed
    # A future `seen` is clamped to when it was read, and it ages from there.
    first = listed["future"]["seen_ms"]
    assert first <= int(time.time() * 1000)
    seen = n1.status()["bridge"]["seen_ms"]
    wait_for(lambda: n1.status()["bridge"]["seen_ms"] > seen + 600, 30, "two more beats")
    assert _entries(n1)["future"]["seen_ms"] == first

    # Mail still crosses, both ways, with the same bridge processes.
    n1.send("bob@node2", "through the poison")
    n2.send("alice@node1", "and back")
    wait_for(lambda: mailbox(n2, "bob") and mailbox(n1, "alice"), 30, "both messages")
    assert (n1.bridge.pid, n2.bridge.pid) == pids
    assert n1.bridge.poll() is None and n2.bridge.poll() is None

    # A deleted entry is forgotten, and mail to it refused rather than queued.
    _raw(nats.url, lambda js, _nc: _delete(js, "ghost"))
    wait_for(lambda: "ghost" not in _entries(n1), 30, "ghost to be forgotten")
    assert [e["node"] for e in n1.d.events(kind="bridge/forgotten")] == ["ghost"]
    r = n1.d.bench("mail", "send", "x@ghost", "-m", "hi")
    assert r.rc == 1 and "[unknown-node]" in r.err
    with open(os.path.join(n1.dir, "nodes.json")) as f:
        assert "ghost" not in f.read()


async def _delete(js, key: str) -> None:
    kv = await js.key_value("BENCH_NODES")
    await kv.delete(key)


def test_a_node_not_seen_for_forget_after_is_forgotten(nats, nodes):  # noqa: F811
    n1 = nodes("node1", bridge=False)
    n1.start_bridge("--forget-after", "60")
    old = int(time.time() * 1000) - 120_000

    async def put(js, _nc):
        kv = await js.key_value("BENCH_NODES")
        await kv.put("stale", json.dumps({"node": "stale", "seen_ms": old}).encode())
        await kv.put("recent", json.dumps({"node": "recent", "seen_ms": old + 100_000}).encode())

    _raw(nats.url, put)
    wait_for(lambda: n1.knows("recent"), 30, "the recent node")
    assert not n1.knows("stale")
    r = n1.d.bench("mail", "send", "x@stale", "-m", "hi")
    assert r.rc == 1 and "[unknown-node]" in r.err


def test_two_daemons_with_one_node_name_refuse_the_second_bridge(nats, nodes):  # noqa: F811
    src = nodes("src1")
    first = nodes("dup")
    wait_known(src, first)
    second = Node("dup", nats).start()
    try:
        out = open(second.bridge_log, "ab")  # noqa: SIM115 - the bridge process writes to it
        proc = subprocess.Popen(
            [BENCH, "bridge", "--nats", nats.url, "--heartbeat", "0.5"],
            env=second.d.env(),
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        assert proc.wait(60) == 1
        assert "[node-name-taken]" in second.bridge_output()
        st = second.status()
        assert st["bridge"]["error"]["code"] == "node-name-taken"
        assert "node-name-taken" in second.d.bench("status").out
        assert [e["code"] for e in second.d.events(kind="bridge/stopped")] == ["node-name-taken"]
        # Mail to the name goes to the one node that holds it, all of it.
        for i in range(20):
            src.send("bob@dup", f"n {i}", "--key", f"k{i}")
        wait_for(lambda: len(mailbox(first, "bob")) == 20, 60, "all 20 on the first")
        assert mailbox(second, "bob") == []
        # The first bridge, restarted on its own BENCH_DIR, is the same instance: it runs.
        first.kill_bridge(signal.SIGKILL)
        first.start_bridge()
        assert first.bridge.poll() is None
    finally:
        second.close()


def _forge(url: str, on: str, **fields) -> None:
    mail = m.RemoteMail(mail_id="20261130T000000.000Z-0001", **fields)

    async def publish(js, _nc):
        await js.publish(on, msgspec.json.encode(mail))

    _raw(url, publish)


def _bounces(n: Node) -> list[dict]:
    return [x for x in mailbox(n, "operator") if x["from"].startswith("postmaster@")]


def test_far_refusals_come_back_to_the_sender_as_bounces(pair, nats):
    n1, n2 = pair
    # Someone with node1's NATS access claims (operator@node1, deploy-7) first, and
    # sends one message to a name that is not a handle.
    _forge(
        nats.url,
        "bench.mail.node2.node1.bob",
        sender="operator@node1",
        to="bob@node2",
        key="deploy-7",
        body="claimed first",
    )
    _forge(
        nats.url,
        "bench.mail.node2.node1.x",
        sender="operator@node1",
        to="Bad!@node2",
        key="bad-1",
        body="to nobody",
        subject="lost",
    )
    wait_for(lambda: mailbox(n2, "bob"), 30, "the claiming message")
    real = n1.send("bob@node2", "the real one", "--key", "deploy-7", "-s", "deploy")
    wait_for(lambda: len(_bounces(n1)) == 2, 60, "two bounces for node1's operator")
    by_code = {}
    for b in _bounces(n1):
        code = b["subject"].split("[", 1)[1].split("]", 1)[0]
        by_code[code] = b
    assert set(by_code) == {"key-conflict", "bad-handle"}, by_code
    conflict = by_code["key-conflict"]
    assert conflict["from"] == "postmaster@node2"
    assert conflict["in-reply-to"] == real["mail_id"]
    assert real["mail_id"] in conflict["body"] and "code:    key-conflict" in conflict["body"]
    assert "to:      bob@node2" in conflict["body"] and "deploy" in conflict["subject"]
    assert "Bad!@node2" in by_code["bad-handle"]["body"]
    # bridge/bounced on both nodes: where it was refused, and where the bounce landed.
    far = n2.d.events(kind="bridge/bounced")
    assert sorted(e["code"] for e in far) == ["bad-handle", "key-conflict"]
    assert {e["node"] for e in far} == {"node2"}
    near = n1.d.wait_event("bridge/bounced", lambda e: e["code"] == "key-conflict")
    assert near["mail_id"] == real["mail_id"] and near["node"] == "node2"
    wait_for(lambda: len(n1.d.events(kind="bridge/bounced")) == 2, 30, "both on node1")
    # The bounce itself is delivered once; only the claiming message reached bob.
    assert [x["body"] for x in mailbox(n2, "bob")] == ["claimed first"]


def test_mail_older_than_max_age_is_returned_to_its_sender(nats, nodes):  # noqa: F811
    n1, n2 = nodes("node1"), nodes("node2")
    wait_known(n1, n2)
    n2.kill_bridge(signal.SIGTERM)
    sent = n1.send("bob@node2", "too late", "-s", "stale")
    fw = n1.d.wait_event("bridge/forwarded", lambda e: e["mail_id"] == sent["mail_id"])
    # The message has now waited in the stream longer than node2's --max-age of 1 s.
    wait_for(lambda: _older_than(fw["ts"], 1.5), 30, "the message to age")
    n2.start_bridge("--max-age", "1")
    wait_for(lambda: _bounces(n1), 60, "the bounce")
    (b,) = _bounces(n1)
    assert b["from"] == "postmaster@node2" and "[expired]" in b["subject"]
    assert b["in-reply-to"] == sent["mail_id"] and "code:    expired" in b["body"]
    assert mailbox(n2, "bob") == []
    (far,) = n2.d.events(kind="bridge/bounced")
    assert far["code"] == "expired" and far["mail_id"] == sent["mail_id"]
    n1.d.wait_event("bridge/bounced", lambda e: e["code"] == "expired")


def _older_than(ts_ms: int, seconds: float) -> bool:
    return time.time() - ts_ms / 1000 > seconds


def _auth_server(users: dict[str, str], init: bool = True) -> NatsServer:
    """A server with the documented configuration; `init`: the administrator has run
    `bench nodes init` on it."""
    from tests.nodes import admin_url, auth_config, nodes_init

    server = NatsServer()
    conf = os.path.join(server.store, "nats.conf")
    with open(conf, "w") as f:
        f.write(auth_config(users))
    server.args = ["-c", conf]
    server.start()
    if init:
        r = nodes_init(admin_url(server))
        assert r.returncode == 0, r.stderr
    return server


def _as(server: NatsServer, user: str, password: str) -> str:
    return f"nats://{user}:{password}@127.0.0.1:{server.port}"


def test_per_node_nats_users_bind_the_origin(tmp_path):
    users = {"node1": "pw-one", "node2": "pw-two"}
    server = _auth_server(users)
    n1 = Node("node1", server).start()
    n2 = Node("node2", server).start()
    try:
        for n in (n1, n2):
            n.nats_url = _as(server, n.name, users[n.name])
            n.start_bridge()
        wait_known(n1, n2)
        n1.send("bob@node2", "as myself")
        n2.send("alice@node1", "and back")
        wait_for(lambda: mailbox(n2, "bob") and mailbox(n1, "alice"), 30, "mail both ways")
        assert "pw-one" not in n1.bridge_output() and "node1:***@" in n1.bridge_output()

        import nats as nats_py

        refused: list[str] = []

        async def forge():
            async def on_error(err):
                refused.append(str(err))

            nc = await nats_py.connect(
                _as(server, "node1", users["node1"]),
                error_cb=on_error,
                inbox_prefix="_INBOX_node1",
            )
            js = nc.jetstream()
            mail = m.RemoteMail(
                mail_id="20261130T000000.000Z-0001",
                sender="operator@node2",
                to="bob@node2",
                key="forged",
                body="node1 speaking as node2",
            )
            # node1 publishing as node2: NATS refuses the subject.
            with pytest.raises(nats_py.errors.Error):
                await js.publish("bench.mail.node2.node2.bob", msgspec.json.encode(mail), timeout=3)
            # node1 writing node2's directory entry: refused too.
            kv = await js.key_value("BENCH_NODES")
            with pytest.raises(nats_py.errors.Error):
                await kv.put("node2", b'{"node":"node2","seen_ms":1}')
            # node1 reading node2's mail: its consumer cannot be pulled by node1.
            with pytest.raises(nats_py.errors.Error):
                await nc.request(
                    "$JS.API.CONSUMER.MSG.NEXT.BENCH_MAIL.bench-node2", b'{"batch":1}', timeout=3
                )
            # As itself, with a header claiming node2: the subject decides, and the
            # sender's address must name node1, so this one is refused by node2.
            await js.publish(
                "bench.mail.node2.node1.bob",
                msgspec.json.encode(mail),
                headers={"Bench-Node": "node2"},
            )
            await nc.close()

        asyncio.run(forge())
        assert any("permissions violation" in x.lower() for x in refused), refused
        wait_for(lambda: "[forged-sender]" in n2.bridge_output(), 30, "the forgery refused")
        n1.send("bob@node2", "still flowing")
        wait_for(lambda: len(mailbox(n2, "bob")) == 2, 30, "the next true message")
        assert sorted(x["from"] for x in mailbox(n2, "bob")) == ["operator@node1"] * 2
        with open(os.path.join(server.store, "server.log")) as f:
            log = f.read()
        assert "bench.mail.node2.node2.bob" in log and "$KV.BENCH_NODES.node2" in log
    finally:
        n1.close()
        n2.close()
        server.close()


def test_the_documented_nats_configuration_is_the_tested_one():
    import re

    from tests.nodes import auth_config

    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "nodes.md")
    with open(doc) as f:
        text = f.read()
    block = text.split('{user: "node1"', 1)[1].split("```", 1)[0]
    documented = re.findall(r'"([^"]+)"', block)
    tested = auth_config({"node1": "CHANGE-ME-1"}).split('{user: "node1"', 1)[1]
    assert set(documented) == set(re.findall(r'"([^"]+)"', tested))
