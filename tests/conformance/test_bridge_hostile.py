"""A hostile node: what one node with its documented NATS user (or anyone with NATS
access, on an open server) tries against the others, and what it gets. Real daemons,
real `bench bridge` processes, a real `nats-server -js` with the configuration
docs/nodes.md shows (tests.nodes.auth_config)."""

import asyncio
import datetime
import os
import signal

import msgspec
import pytest

from bench_bridge import natsside, urls
from bench_wire import messages as m
from tests.conformance.test_bridge import mailbox, wait_for
from tests.conformance.test_bridge import nats as nats  # noqa: F401 - the fixture
from tests.conformance.test_bridge import nodes as nodes  # noqa: F401 - the fixture
from tests.conformance.test_bridge import pair as pair  # noqa: F401 - the fixture
from tests.conformance.test_bridge import pytestmark as pytestmark  # noqa: F401 - skip reason
from tests.conformance.test_bridge_trust import _as, _auth_server
from tests.nodes import NatsServer, Node, admin_url, nodes_init, wait_known

USERS = {"node1": "pw-one", "node2": "pw-two", "node3": "pw-three"}


def _client(url: str, work, inbox: str | None = None):
    """Run `work(js, nc, errors)` with a plain nats-py client connected to `url`;
    `errors` collects what the server said asynchronously (permissions violations)."""
    import nats as nats_py

    async def go():
        errors: list[str] = []

        async def on_error(err):
            errors.append(str(err))

        opts = {"error_cb": on_error, "allow_reconnect": False}
        if inbox:
            opts["inbox_prefix"] = inbox
        nc = await nats_py.connect(url, **opts)
        try:
            return await work(nc.jetstream(timeout=3), nc, errors)
        finally:
            await nc.close()

    return asyncio.run(go())


def _start(server: NatsServer, *names: str, **bridge_args: tuple[str, ...]) -> list[Node]:
    made = []
    for name in names:
        n = Node(name, server).start()
        made.append(n)
        n.nats_url = _as(server, name, USERS[name])
        n.start_bridge(*bridge_args.get(name, ()))
    return made


# ---------------------------------------------------------------- the stream


def test_a_node_cannot_make_the_stream_and_the_bridge_waits_for_the_administrator():
    server = _auth_server(USERS, init=False)
    try:
        from nats.js import api

        async def spy(js, nc, errors):
            # What the trial did: node1 makes BENCH_MAIL first, republishing every
            # message to an inbox it reads.
            with pytest.raises(Exception):  # noqa: B017 - no answer (timeout) or an error
                await js.add_stream(
                    name="BENCH_MAIL",
                    subjects=["bench.mail.>"],
                    republish=api.RePublish(src="bench.mail.>", dest="_INBOX_node1.spy.>"),
                )
            return errors

        errors = _client(_as(server, "node1", USERS["node1"]), spy, "_INBOX_node1")
        assert any("permissions violation" in e.lower() for e in errors), errors
        # A node's bridge cannot make it either: it says what is missing and who acts.
        n2 = Node("node2", server).start()
        try:
            r = n2.d.bench("bridge", "--nats", _as(server, "node2", USERS["node2"]))
            assert r.rc == 1 and "[stream-missing]" in r.err and "bench nodes init" in r.err
            stopped = n2.d.wait_event("bridge/stopped")
            assert stopped["code"] == "stream-missing"
            assert "[stream-missing]" in n2.d.bench("status").out
        finally:
            n2.close()
        # The administrator's step makes both, with quotas; running it again updates.
        r = nodes_init(admin_url(server))
        assert r.returncode == 0, r.stderr
        assert "created BENCH_MAIL" in r.stdout and "created KV_BENCH_NODES" in r.stdout
        r = nodes_init(admin_url(server))
        assert "updated BENCH_MAIL" in r.stdout, r.stderr
        # A node's user cannot run it.
        r = nodes_init(_as(server, "node1", USERS["node1"]))
        assert r.returncode == 1 and "[nats-refused]" in r.stderr, r.stderr

        async def config(js, nc, errors):
            return (await js.stream_info("BENCH_MAIL")).config

        cfg = _client(admin_url(server), config)
        assert cfg.republish is None and cfg.max_bytes > 0 and cfg.max_msg_size > 0
        assert cfg.max_age >= 7 * 86400 and cfg.deny_purge and cfg.deny_delete
    finally:
        server.close()


def test_a_tampered_stream_is_refused_at_start_and_on_reconnect(nats):
    from nats.js import api

    async def tamper(js, nc, errors):
        await js.add_stream(
            name="BENCH_MAIL",
            subjects=["bench.mail.>"],
            retention=api.RetentionPolicy.WORK_QUEUE,
            duplicate_window=120.0,
            republish=api.RePublish(src="bench.mail.>", dest="spy.>"),
        )

    _client(nats.url, tamper)
    n1 = Node("node1", nats).start()
    try:
        r = n1.d.bench("bridge", "--nats", nats.url)
        assert r.rc == 1 and "[stream-misconfigured]" in r.err and "republishes" in r.err
        assert len([x for x in r.err.splitlines() if "stream-misconfigured" in x]) == 1
        assert n1.d.wait_event("bridge/stopped")["code"] == "stream-misconfigured"
        assert "bridge stopped" in n1.d.bench("status").out
        assert n1.status()["bridge"]["error"]["code"] == "stream-misconfigured"

        # The administrator puts it right; the bridge runs.
        r = nodes_init(nats.url)
        assert r.returncode == 0, r.stderr
        n1.start_bridge()

        # Tampered while the bridge runs, then the server restarts: the bridge checks
        # again on reconnect and stops.
        async def spy(js, nc, errors):
            info = await js.stream_info("BENCH_MAIL")
            cfg = info.config
            cfg.republish = api.RePublish(src="bench.mail.>", dest="spy.>")
            await js.update_stream(config=cfg)

        _client(nats.url, spy)
        nats.stop()
        nats.start()
        n1.bridge.wait(60)
        assert n1.bridge.returncode == 1
        assert "[stream-misconfigured]" in n1.bridge_output()
        wait_for(
            lambda: (n1.status()["bridge"]["error"] or {}).get("code") == "stream-misconfigured",
            30,
            "status to say the stream was refused",
        )
    finally:
        n1.close()


def test_streams_an_older_bridge_made_are_refused_until_init_updates_them(nats):
    from nats.js import api

    async def old(js, nc, errors):
        # As bridges made them before `bench nodes init`: no quotas, rollups allowed.
        await js.add_stream(
            name="BENCH_MAIL",
            subjects=["bench.mail.>"],
            retention=api.RetentionPolicy.WORK_QUEUE,
            storage=api.StorageType.FILE,
            duplicate_window=120.0,
        )
        await js.create_key_value(bucket="BENCH_NODES", history=1, ttl=604800.0)

    _client(nats.url, old)
    n1 = Node("node1", nats).start()
    try:
        r = n1.d.bench("bridge", "--nats", nats.url)
        assert r.rc == 1 and "[stream-misconfigured]" in r.err and "no quotas" in r.err
        r = nodes_init(nats.url)
        assert r.returncode == 0 and "updated KV_BENCH_NODES" in r.stdout, r.stderr
        n1.start_bridge()
        assert n1.bridge.poll() is None
    finally:
        n1.close()


# ---------------------------------------------------------------- the directory


def test_no_node_can_remove_hide_or_rewrite_another_nodes_entry():
    server = _auth_server(USERS)
    n1, n2 = _start(server, "node1", "node2")
    try:
        wait_known(n1, n2)

        async def attack(js, nc, errors):
            import nats as nats_py

            kv = await js.key_value("BENCH_NODES")
            outcomes = {}
            # The trial's attack: a rollup of the whole bucket from node1's own key.
            for rollup in ("all", "sub"):
                try:
                    await js.publish(
                        "$KV.BENCH_NODES.node1",
                        b'{"node":"node1","seen_ms":1}',
                        headers={"Nats-Rollup": rollup},
                        timeout=3,
                    )
                    outcomes[rollup] = "stored"
                except nats_py.errors.Error as err:
                    outcomes[rollup] = str(err)
            for name, op in (
                ("delete", lambda: kv.delete("node2")),
                ("purge", lambda: kv.purge("node2")),
                ("put", lambda: kv.put("node2", b'{"node":"node2","seen_ms":1}')),
            ):
                try:
                    await op()
                    outcomes[name] = "done"
                except (nats_py.errors.Error, TimeoutError) as err:
                    outcomes[name] = str(err) or type(err).__name__
            for api_subject in (
                "$JS.API.STREAM.PURGE.KV_BENCH_NODES",
                "$JS.API.STREAM.MSG.DELETE.KV_BENCH_NODES",
                "$JS.API.STREAM.DELETE.KV_BENCH_NODES",
                "$JS.API.STREAM.UPDATE.KV_BENCH_NODES",
            ):
                try:
                    await nc.request(api_subject, b'{"seq":1}', timeout=2)
                    outcomes[api_subject] = "answered"
                except (nats_py.errors.Error, TimeoutError):
                    outcomes[api_subject] = "refused"
            await nc.flush()
            return outcomes, errors

        outcomes, errors = _client(_as(server, "node1", USERS["node1"]), attack, "_INBOX_node1")
        assert outcomes["all"] != "stored" and "rollup" in outcomes["all"].lower(), outcomes
        assert outcomes["sub"] != "stored", outcomes
        assert outcomes["delete"] != "done" and outcomes["purge"] != "done", outcomes
        assert outcomes["put"] != "done", outcomes
        assert all(v == "refused" for k, v in outcomes.items() if k.startswith("$JS")), outcomes
        assert any("permissions violation" in e.lower() for e in errors), errors

        async def entry(js, nc, errors):
            kv = await js.key_value("BENCH_NODES")
            return (await kv.get("node2")).value

        assert b'"node":"node2"' in _client(admin_url(server), entry)
        # node2 is still known to node1 a few beats later, and mail to it crosses.
        seen = n1.status()["bridge"]["seen_ms"]
        wait_for(lambda: n1.status()["bridge"]["seen_ms"] > seen + 1500, 30, "more beats")
        assert n1.knows("node2")
        n1.send("bob@node2", "still reachable")
        wait_for(lambda: mailbox(n2, "bob"), 30, "the message to node2")
        assert not n1.d.events(kind="bridge/forgotten")
    finally:
        n1.close()
        n2.close()
        server.close()


def test_reading_the_directory_leaves_no_consumers(pair, nats):
    n1, n2 = pair
    # At two reads per heartbeat of 0.5 s, each bridge reads it 40 times in 10 s; the
    # old listing made one consumer per read, kept by the server for minutes.
    for _ in range(3):
        seen = n1.status()["bridge"]["seen_ms"]
        wait_for(lambda s=seen: n1.status()["bridge"]["seen_ms"] > s + 3000, 30, "reads")

    async def count(js, nc, errors):
        return (await js.stream_info("KV_BENCH_NODES")).state.consumer_count

    assert _client(nats.url, count) <= 2 * 2
    assert n1.knows("node2") and n2.knows("node1")


# ---------------------------------------------------------------- dedup ids


def _old_ids(origin: str, sender: str, key: str, body: str, start: float, seconds: int):
    """Every id the old scheme would give a message sent within `seconds` of `start`:
    what a node that knows (or guesses) sender, key and body can publish first."""
    out = []
    for ms in range(int(start * 1000) - 500, int(start * 1000) + seconds * 1000):
        t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
        mail_id = t.strftime("%Y%m%dT%H%M%S.") + f"{ms % 1000:03d}Z-0001"
        x = m.RemoteMail(mail_id=mail_id, sender=sender, to="", key=key, body=body)
        out.append(urls.msg_id(origin, sender, key, natsside.digest(x)))
    return out


def test_a_node_cannot_claim_a_messages_dedup_id_first():
    import time

    server = _auth_server(USERS)
    n2, n3 = _start(server, "node2", "node3")
    try:
        wait_known(n2, n3)
        body = "deploy approved"
        start = time.time()
        ids = _old_ids("node2", "operator@node2", "k-deploy", body, start, 20)

        async def claim(js, nc, errors):
            # node1 publishes first under every id the message could have had (on a
            # subject nobody reads: the stream's dedup is stream-wide).
            for i, msg_id in enumerate(ids):
                await nc.publish(
                    "bench.mail.nobody.node1.x", b"{}", headers={"Nats-Msg-Id": msg_id}
                )
                if i % 1000 == 999:
                    await nc.flush()
            await nc.flush()
            return errors

        errors = _client(_as(server, "node1", USERS["node1"]), claim, "_INBOX_node1")
        assert not errors, errors
        a = n2.send("carol@node3", body, "--key", "k-deploy")
        # The attack would have hit: the old id of the message just sent was claimed.
        x = m.RemoteMail(
            mail_id=a["mail_id"], sender="operator@node2", to="", key="k-deploy", body=body
        )
        assert urls.msg_id("node2", "operator@node2", "k-deploy", natsside.digest(x)) in ids
        wait_for(lambda: mailbox(n3, "carol"), 30, "the message to arrive anyway")
        assert mailbox(n3, "carol")[0]["body"] == body
        # Its nonce is in the queue file on node2, and only there.
        (queued,) = [x for x in mailbox(n2, "@outbound") if x["id"] == a["mail_id"]]
        assert len(queued["nonce"]) == 32
        assert "nonce" not in mailbox(n3, "carol")[0]
    finally:
        n2.close()
        n3.close()
        server.close()


# ---------------------------------------------------------------- quotas


def test_the_receiving_bridge_bounces_reply_to_floods_and_mailbox_floods(nats, nodes):
    n1 = nodes("node1")
    n2 = nodes("node2", bridge=False)
    n2.start_bridge("--new-mailboxes-per-hour", "3")
    wait_known(n1, n2)

    async def flood(js, nc, errors):
        mail = m.RemoteMail(
            mail_id="20261201T000000.000Z-0001",
            sender="mallory@node1",
            to="bob@node2",
            key="many-replies",
            body="reply to all of these",
            reply_to=[f"x{i}@node1" for i in range(5000)],
        )
        await js.publish("bench.mail.node2.node1.bob", msgspec.json.encode(mail))

    _client(nats.url, flood)
    e = n2.d.wait_event("bridge/bounced", lambda e: e["code"] == "too-many-recipients")
    assert e["to"] == "bob@node2" and e["from"] == "mallory@node1"
    wait_for(lambda: mailbox(n1, "mallory"), 30, "the bounce back at node1")
    assert "too-many-recipients" in mailbox(n1, "mallory")[0]["subject"]
    assert not mailbox(n2, "bob")

    # New mailboxes from one node beyond the rate are bounced; known ones still land.
    for i in range(5):
        n1.send(f"u{i}@node2", f"hello {i}")
    wait_for(lambda: len(n2.d.events(kind="bridge/bounced")) == 3, 30, "two more bounces")
    made = [i for i in range(5) if mailbox(n2, f"u{i}")]
    assert len(made) == 3, made
    codes = [e["code"] for e in n2.d.events(kind="bridge/bounced")]
    assert codes.count("new-mailbox-rate") == 2
    n1.send(f"u{made[0]}@node2", "again, to a mailbox it made")
    wait_for(lambda: len(mailbox(n2, f"u{made[0]}")) == 2, 30, "mail to a known mailbox")


def test_the_stream_quotas_hold(nats):
    r = nodes_init(nats.url, "--max-bytes", "200000", "--max-msg-size", "10000")
    assert r.returncode == 0, r.stderr

    async def fill(js, nc, errors):
        import nats as nats_py

        with pytest.raises(nats_py.errors.Error, match="maximum"):
            await js.publish("bench.mail.node9.node1.x", b"y" * 20000)
        stored = 0
        with pytest.raises(nats_py.errors.Error, match="maximum bytes"):
            for _ in range(400):
                await js.publish("bench.mail.node9.node1.x", b"z" * 5000)
                stored += 1
        return stored

    stored = _client(nats.url, fill)
    assert 30 <= stored < 40  # 200,000 bytes of 5,000-byte messages (and headers)


# ---------------------------------------------------------------- outages


def test_a_nats_outage_with_nothing_queued_is_seen_at_once(pair, nats):
    n1, n2 = pair
    assert n1.status()["bridge"]["queued"] == 0
    nats.stop()
    n1.d.wait_event("bridge/disconnected", timeout=15)
    assert n1.status()["bridge"]["connected"] is False
    assert "bridge not connected" in n1.d.bench("status").out
    assert "lost the connection to NATS" in n1.bridge_output()
    with open(os.path.join(n1.dir, "benchd.log")) as f:
        assert "bridge lost its NATS connection" in f.read()
    nats.start()
    e = n1.d.wait_event("bridge/reconnected", timeout=60)
    assert e["down_s"] > 0
    wait_for(lambda: n1.status()["bridge"]["connected"], 30, "connected again")
    n1.send("bob@node2", "after the outage")
    wait_for(lambda: mailbox(n2, "bob"), 30, "mail after the outage")
    assert n1.bridge.poll() is None
    n1.kill_bridge(signal.SIGTERM)
