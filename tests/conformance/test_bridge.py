"""Mail between nodes: two real daemons (node1, node2), each with a real `bench bridge`,
over a real `nats-server -js` on loopback (free port, temporary store)."""

import asyncio
import glob
import os
import signal
import subprocess
import time

import pytest

from benchd.core import frontmatter
from tests.conftest import BENCH, standin_argv, wait_for
from tests.nodes import NatsServer, Node, bridged_pair, have_bridge, wait_known

pytestmark = pytest.mark.skipif(have_bridge() is not None, reason=str(have_bridge()))


@pytest.fixture
def nats():
    server = NatsServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def nodes(nats):
    made: list[Node] = []

    def make(name: str, bridge: bool = True) -> Node:
        n = Node(name, nats).start()
        made.append(n)
        if bridge:
            n.start_bridge()
        return n

    yield make
    for n in made:
        n.close()


@pytest.fixture
def pair(nodes):
    n1, n2 = nodes("node1"), nodes("node2")
    wait_known(n1, n2)
    return n1, n2


@pytest.fixture(scope="module")
def shared_pair():
    """node1 and node2 with their bridges and their NATS server, for the module's tests
    that look only at handles and keys of their own and change no node (a pair costs
    seconds to start)."""
    with bridged_pair() as made:
        yield made


def mailbox(node: Node, handle: str) -> list[dict]:
    """Every message in handle's mailbox (inbox and read), front matter parsed."""
    out = []
    for sub in ("inbox", "read"):
        for path in glob.glob(os.path.join(node.dir, "mail", handle, sub, "*.md")):
            with open(path, "rb") as f:
                meta, body = frontmatter.parse(f.read())
            meta["body"] = body.decode()
            out.append(meta)
    return out


def test_both_ways_a_reply_a_wake_on_the_far_node_and_listings(pair):
    n1, n2 = pair
    # alice lives on node1, carol on node2; carol answers every wake with number+1 to alice.
    n1.d.ok("spawn", "--name", "alice", "--ready", "standin>", "--", *standin_argv())
    n2.d.ok(
        "spawn",
        "--name",
        "carol",
        "--ready",
        "standin>",
        "--",
        *standin_argv("--ring", "alice@node1"),
    )
    sent = n1.send("carol@node2", "number 7", "-s", "ring")
    assert sent["note"] == "queued-for-node2" and sent["to"] == "carol@node2"
    assert "/mail/@outbound/" in sent["path"]

    woken = n2.d.wait_event("agent/woken", lambda e: e["handle"] == "carol")
    assert woken["from"] == "operator@node1"
    # carol's reply crosses back and wakes alice on node1, from carol's full address.
    back = n1.d.wait_event("agent/woken", lambda e: e["handle"] == "alice")
    assert back["from"] == "carol@node2"

    got = mailbox(n1, "alice")
    assert [(x["from"], x["body"]) for x in got] == [("carol@node2", "number 8")]
    listing = n2.d.ok("mail", "list", "--handle", "carol", "--state", "all")
    assert [(x["from"], x["subject"]) for x in listing["messages"]] == [("operator@node1", "ring")]
    listing = n1.d.ok("mail", "list", "--handle", "alice", "--state", "all")
    assert [x["from"] for x in listing["messages"]] == ["carol@node2"]

    # Each hop: queued and forwarded on the sending node, delivered on the receiving one.
    fw1 = n1.d.events(kind="bridge/forwarded")
    assert [e["to"] for e in fw1] == ["carol@node2"]
    dl2 = n2.d.events(kind="bridge/delivered")
    assert [(e["from"], e["to"], e["origin"]) for e in dl2] == [
        ("operator@node1", "carol", "node1")
    ]
    assert [e["to"] for e in n2.d.events(kind="bridge/forwarded")] == ["alice@node1"]
    assert wait_for(lambda: n1.status()["bridge"]["queued"] == 0 or None, 10, "queue empty")


def test_reply_to_and_in_reply_to_cross_with_full_addresses(pair):
    n1, n2 = pair
    first = n1.send("bob@node2", "question", "--reply-to", "dave", "--reply-to", "erin@node2")
    wait_for(lambda: mailbox(n2, "bob"), 20, "bob's mail")
    (q,) = mailbox(n2, "bob")
    assert q["from"] == "operator@node1"
    assert q["reply-to"] == ["dave@node1", "erin@node2"]
    assert q["key"] == first["key"]
    # The copy keeps its identity: the id node1 gave it, with node1's name.
    assert q["origin"] == f"{first['mail_id']}@node1" and q["id"] != first["mail_id"]
    # The reply goes to the address in reply-to, and names the message it answers by that
    # identity: on node1, where it was sent from, that is its own id.
    n2.send(q["reply-to"][0], "answer", "--in-reply-to", q["id"])
    wait_for(lambda: mailbox(n1, "dave"), 20, "dave's reply")
    (a,) = mailbox(n1, "dave")
    assert (a["from"], a["in-reply-to"], a["body"]) == (
        "operator@node2",
        first["mail_id"],
        "answer",
    )
    (out,) = mailbox(n2, "@outbound")
    assert out["in-reply-to"] == q["origin"]


def test_own_node_address_is_local(shared_pair):
    n1, _, _ = shared_pair
    a = n1.send("ownbob@node1", "to myself", "--reply-to", "carol@node2")
    assert a["note"] == "no-live-session" and a["to"] == "ownbob"
    assert [(x["from"], x["reply-to"]) for x in mailbox(n1, "ownbob")] == [
        ("operator", ["carol@node2"])
    ]
    r = n1.d.bench("mail", "send", "ownbob", "-m", "x", "--reply-to", "carol@Bad")
    assert r.rc == 1 and "[bad-node]" in r.err


def test_unknown_node_is_refused_and_nothing_queued(pair):
    n1, _ = pair
    r = n1.d.bench("mail", "send", "bob@nowhere", "-m", "hi")
    assert r.rc == 1 and "[unknown-node]" in r.err
    r = n1.d.bench("mail", "send", "bob@Bad!Node", "-m", "hi")
    assert r.rc == 1 and "[bad-node]" in r.err
    assert n1.status()["bridge"]["queued"] == 0
    assert not os.path.exists(os.path.join(n1.dir, "mail", "@outbound"))


def test_resend_with_the_same_key_is_a_duplicate(shared_pair):
    n1, n2, _ = shared_pair
    a = n1.send("keybob@node2", "once", "--key", "keybob-1")
    b = n1.send("keybob@node2", "once", "--key", "keybob-1")
    assert b["duplicate"] and b["mail_id"] == a["mail_id"] and b["to"] == "keybob@node2"
    text = n1.d.bench("mail", "send", "keybob@node2", "-m", "in words", "--key", "keybob-2")
    assert (
        text.rc == 0
        and text.out.startswith("queued ")
        and "for keybob@node2 (node node2)" in text.out
    )
    wait_for(lambda: mailbox(n2, "keybob"), 20, "keybob's mail")
    wait_for(lambda: len(mailbox(n2, "keybob")) == 2, 20, "the second key's message")
    assert sorted(x["key"] for x in mailbox(n2, "keybob")) == ["keybob-1", "keybob-2"]


def test_offline_node_queues_then_gets_everything(nats, nodes):
    n1 = nodes("node1")
    n2 = nodes("node2")
    wait_known(n1, n2)
    n2.kill_bridge(signal.SIGTERM)
    n2.d.stop()
    keys = [f"off-{i}" for i in range(20)]
    for k in keys:
        a = n1.send("bob@node2", f"body {k}", "--key", k)
        assert a["note"] == "queued-for-node2"
    # Forwarded into JetStream while node2 is away: the mail waits in the stream.
    wait_for(lambda: len(n1.d.events(kind="bridge/forwarded")) == 20, 30, "all forwarded")
    assert n1.status()["bridge"]["queued"] == 0
    n2.d.start()
    n2.start_bridge()
    wait_for(lambda: len(mailbox(n2, "bob")) >= 20, 30, "bob's 20 messages")
    got = sorted(x["key"] for x in mailbox(n2, "bob"))
    assert got == sorted(keys)


def test_queued_while_nats_unreachable_shows_in_status_and_retries(nats, nodes):
    n1 = nodes("node1")
    n2 = nodes("node2")
    wait_known(n1, n2)
    n1.kill_bridge(signal.SIGTERM)  # a clean stop says so: not connected at once
    assert n1.status()["bridge"]["connected"] is False
    a = n1.send("bob@node2", "waits for the bridge")
    st = n1.status()
    assert st["bridge"]["queued"] == 1 and st["node"] == "node1"
    text = n1.d.bench("status").out
    assert "1 queued outbound" in text
    nats.stop()
    # A bridge started while NATS is down keeps trying (bridge/retry), then forwards.
    out = open(n1.bridge_log, "ab")  # noqa: SIM115 - the bridge process writes to it after this line
    n1.bridge = subprocess.Popen(
        [BENCH, "bridge", "--nats", nats.url, "--heartbeat", "0.5"],
        env=n1.d.env(),
        stdout=out,
        stderr=out,
        stdin=subprocess.DEVNULL,
    )
    out.close()
    n1.d.wait_event("bridge/retry")
    nats.start()
    wait_for(lambda: mailbox(n2, "bob"), 60, "the queued message to arrive")
    assert [x["key"] for x in mailbox(n2, "bob")] == [a["key"]]


def test_a_message_from_nats_speaks_only_for_its_subjects_node(pair, nats):
    _, n2 = pair
    import msgspec
    import nats as nats_py

    from bench_wire import messages as m

    async def publish():
        nc = await nats_py.connect(nats.url)
        js = nc.jetstream()
        sends = [
            # (subject, sender): the origin node is the subject's fourth token
            ("bench.mail.node2.node1.bob", "operator"),
            ("bench.mail.node2.node1.bob", "bob@node2"),
            ("bench.mail.node2.node1.bob", "mallory@node9"),
            ("bench.mail.node2.bob", "operator@node1"),  # no origin in the subject
            ("bench.mail.node2.node1.bob", "eve@node1"),  # the one that is true
        ]
        for i, (subject, sender) in enumerate(sends):
            mail = m.RemoteMail(
                mail_id="20261130T000000.000Z-0001",
                sender=sender,
                to="bob@node2",
                key=f"claim-{i}",
                body=f"claim {i}",
            )
            # The header is not believed either: only the subject names the origin.
            await js.publish(subject, msgspec.json.encode(mail), headers={"Bench-Node": "node9"})
        await nc.close()

    asyncio.run(publish())
    wait_for(lambda: mailbox(n2, "bob"), 20, "the true message")
    # Delivered in stream order: the four before it were refused, not delayed.
    assert [(x["from"], x["body"]) for x in mailbox(n2, "bob")] == [("eve@node1", "claim 4")]
    assert [e["origin"] for e in n2.d.events(kind="bridge/delivered")] == ["node1"]
    out = n2.bridge_output()
    assert out.count("[forged-sender]") == 3 and "not a bench mail subject" in out


def test_bridge_refuses_a_clear_text_url_to_another_host(daemon):
    r = daemon.bench("bridge", "--nats", "nats://192.0.2.1:4222")
    assert r.rc == 2 and "[insecure-url]" in r.err and "Traceback" not in r.err
    r = daemon.bench("bridge", "--nats", "http://127.0.0.1:4222")
    assert r.rc == 2 and "[bad-url]" in r.err
    junk = os.path.join(daemon.dir, "not-a-ca.pem")
    with open(junk, "w") as f:
        f.write("not a certificate")
    r = daemon.bench("bridge", "--nats", "tls://127.0.0.1:4222", "--tls-ca", junk)
    assert r.rc == 2 and "[bad-tls]" in r.err and "Traceback" not in r.err
    r = daemon.bench("bridge", "--nats", "tls://127.0.0.1:4222", "--tls-ca", junk + ".missing")
    assert r.rc == 2 and "does not exist" in r.err
    # A number that is not positive is refused naming its own flag, before any connection.
    r = daemon.bench("bridge", "--nats", "nats://127.0.0.1:4222", "--ack-wait", "0")
    assert r.rc == 2 and "--ack-wait: must be positive" in r.err, r
    r = daemon.bench("nodes", "init", "--nats", "nats://127.0.0.1:4222", "--max-msg-size", "-1")
    assert r.rc == 2 and "--max-msg-size: must be positive" in r.err, r


def test_bridge_node_must_match_its_daemon(shared_pair):
    n1, _, nats = shared_pair
    r = n1.d.bench("bridge", "--nats", nats.url, "--node", "other")
    assert r.rc == 1 and "[node-mismatch]" in r.err


def test_nodes_lists_the_directory(shared_pair):
    n1, n2, _ = shared_pair
    n2.d.ok("spawn", "--name", "lister", "--", *standin_argv())
    wait_for(
        lambda: any(n["node"] == "node2" and "lister" in n["handles"] for n in n1.nodes()["nodes"]),
        20,
        "lister in node2's entry",
    )
    (far,) = n1.nodes()["nodes"]
    assert 0 <= far["age_ms"] < 60_000  # an age, as idle_ms is; seen_ms is a time
    assert abs(far["seen_ms"] + far["age_ms"] - time.time() * 1000) < 60_000
    text = n1.d.bench("nodes").out
    assert "this node: node1, bridge connected" in text
    assert "node2" in text and "lister" in text


def test_up_with_bridge_supervises_one(nats):
    from tests.conftest import Benchd, short_tmpdir

    d = short_tmpdir("up")
    b = Benchd(d, [])
    try:
        r = b.bench("up", "--node", "node7", "--bridge", nats.url)
        assert r.rc == 0, r
        wait_for(lambda: b.ok("status")["bridge"]["connected"], 30, "the supervised bridge")
        assert b.ok("status")["node"] == "node7"
        # Killed, it is started again.
        with open(os.path.join(d, "bridge.out")) as f:
            assert "node node7 connected" in f.read()
        pids = subprocess.run(
            ["pgrep", "-f", f"bridge --dir {d}"], capture_output=True, text=True
        ).stdout.split()
        assert len(pids) == 1
        os.kill(int(pids[0]), signal.SIGKILL)
        wait_for(
            lambda: (
                subprocess.run(
                    ["pgrep", "-f", f"bridge --dir {d}"], capture_output=True, text=True
                ).stdout.split()
                not in ([], pids)
            ),
            30,
            "a new bridge process",
        )
    finally:
        b.bench("down")
        import shutil

        shutil.rmtree(d, ignore_errors=True)
    # Stopping the daemon stops its bridge.
    wait_for(
        lambda: (
            not subprocess.run(["pgrep", "-f", f"bridge --dir {d}"], capture_output=True).stdout
        ),
        30,
        "the bridge to end",
    )


def test_token_is_passed_through_and_a_wrong_one_is_a_clear_error(daemon):
    server = NatsServer("--auth", "s3cret-token")
    server.start()
    try:
        r = daemon.bench("bridge", "--nats", server.url, "--token", "wrong", timeout=60)
        assert r.rc == 1 and "[nats-unreachable]" in r.err and "Traceback" not in r.err
        out = open(os.path.join(daemon.dir, "bridge.test.out"), "ab")  # noqa: SIM115 - the bridge process writes to it after this line
        proc = subprocess.Popen(
            [BENCH, "bridge", "--nats", server.url, "--heartbeat", "0.5"],
            env=daemon.env(BENCH_NATS_TOKEN="s3cret-token"),
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        try:
            wait_for(lambda: daemon.ok("status")["bridge"]["connected"], 30, "the bridge")
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        server.close()


def _self_signed(d: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (its own CA) and its key, made with openssl."""
    cert, key = os.path.join(d, "srv.pem"), os.path.join(d, "srv.key")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(
    not __import__("shutil").which("openssl"),
    reason="openssl is not installed (the TLS test makes its certificate)",
)
def test_tls_ca_is_passed_through(daemon):
    cert, key = _self_signed(daemon.dir)
    server = NatsServer("--tls", "--tlscert", cert, "--tlskey", key)
    server.start()
    try:
        url = f"tls://127.0.0.1:{server.port}"
        # The server's certificate is trusted only through --tls-ca (it is its own CA).
        out = open(os.path.join(daemon.dir, "bridge.test.out"), "ab")  # noqa: SIM115 - the bridge process writes to it after this line
        proc = subprocess.Popen(
            [BENCH, "bridge", "--nats", url, "--tls-ca", cert, "--heartbeat", "0.5"],
            env=daemon.env(),
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        try:
            wait_for(lambda: daemon.ok("status")["bridge"]["connected"], 30, "the TLS bridge")
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        server.close()


def test_the_outbound_queue_survives_a_kill9_of_the_daemon(nats, nodes):
    n1 = nodes("node1")
    n2 = nodes("node2")
    wait_known(n1, n2)
    n1.kill_bridge(signal.SIGTERM)
    keys = [f"q-{i}" for i in range(5)]
    for k in keys:
        n1.send("bob@node2", f"body {k}", "--key", k)
    n1.d.kill9()
    n1.d.start()
    assert n1.status()["bridge"]["queued"] == 5
    again = n1.send("bob@node2", "body q-0", "--key", "q-0")
    assert again["duplicate"] and again["to"] == "bob@node2"
    n1.start_bridge()
    wait_for(lambda: len(mailbox(n2, "bob")) >= 5, 30, "the 5 queued messages")
    assert sorted(x["key"] for x in mailbox(n2, "bob")) == keys
    assert sorted(x["from"] for x in mailbox(n2, "bob")) == ["operator@node1"] * 5
