"""The wire protocol over a raw socket: bad input, big frames, slow clients."""

import json
import os
import socket
import time

import pytest

from bench_wire.messages import PROTOCOL_VERSION
from tests.conftest import wait_for
from tests.support.refusal import assert_refused

DEADLINE = 15.0


class Raw:
    """A plain blocking AF_UNIX client that reads JSON lines with a deadline."""

    def __init__(self, daemon, timeout: float = DEADLINE):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(os.path.join(daemon.dir, "benchd.sock"))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"closed; pending {self.buf[:200]!r}")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def recv(self) -> dict:
        obj = json.loads(self.line())
        assert isinstance(obj, dict)
        return obj

    def call(self, req: dict) -> dict:
        self.send(json.dumps(req).encode() + b"\n")
        return self.recv()

    def eof(self) -> bool:
        """True when the daemon closed the connection (after any buffered lines)."""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return True
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def alive(daemon) -> dict:
    assert daemon.proc is not None and daemon.proc.poll() is None, "benchd died"
    with Raw(daemon) as c:
        a = c.call({"verb": "hello", "id": "alive"})
    assert a["ok"] is True and a["id"] == "alive" and a["type"] == "hello"
    return a


# ---------------------------------------------------------------- hello


def test_hello(shared):
    with Raw(shared) as c:
        a = c.call({"verb": "hello", "id": 1})
    assert a["ok"] is True and a["id"] == 1
    assert isinstance(a["version"], str) and a["version"]
    assert a["protocol"] == PROTOCOL_VERSION
    assert a["pid"] == shared.proc.pid
    assert os.path.realpath(a["bench_dir"]) == os.path.realpath(shared.dir)
    caps = a["caps"]
    assert caps["list_cap"] == 50 and caps["list_max"] == 500
    for k in ("frame_bytes", "body_bytes", "subject_chars"):
        assert isinstance(caps[k], int) and caps[k] > 0, k
    # A frame holds the largest body even fully JSON-escaped.
    assert caps["frame_bytes"] > caps["body_bytes"]
    assert a["caller"] == "operator"


def test_hello_without_id_and_with_string_id(shared):
    with Raw(shared) as c:
        a = c.call({"verb": "hello"})
        assert a["ok"] is True and a.get("id") is None
        a = c.call({"verb": "hello", "id": "req-é"})
        assert a["id"] == "req-é"


# ---------------------------------------------------------------- bad input


BAD = [
    # (line, code, echoed id)
    (b"not json", "bad-json", None),
    (b'{"verb": "hello", "id": 5', "bad-json", None),
    (b'{"verb":"hello"} trailing', "bad-json", None),
    (b"[1, 2]", "not-object", None),
    (b'[{"verb":"hello","id":4}]', "not-object", None),
    (b"42", "not-object", None),
    (b'"hello"', "not-object", None),
    (b"null", "not-object", None),
    (b'{"verb":"nope","id":7}', "unknown-verb", 7),
    (b'{"verb":"nope","id":"s7"}', "unknown-verb", "s7"),
    (b'{"verb":"mail/list","limit":"x","id":"s1"}', "bad-request", "s1"),
    (b'{"verb":"mail/list","state":"bogus","id":2}', "bad-request", 2),
    (b'{"verb":"mail/send","id":9}', "bad-request", 9),
    (b'{"verb":"mail/send","to":["bob"],"id":10}', "bad-request", 10),
    (b'{"verb":"events","since":"yesterday","id":11}', "bad-request", 11),
    (b'{"id":12}', "bad-request", 12),
    (b'{"verb":"hello\xff","id":3}', "bad-utf8", None),
    (b"\xc3\x28", "bad-utf8", None),
    (b'{"verb":"mail/send","to":"bob","body":"\xed\xa0\x80","id":13}', "bad-utf8", None),
]


@pytest.mark.parametrize("line, code, rid", BAD, ids=[repr(b[0])[:40] for b in BAD])
def test_bad_line_gets_precise_error_and_connection_stays_usable(shared, line, code, rid):
    with Raw(shared) as c:
        c.send(line + b"\n")
        a = c.recv()
        assert a["ok"] is False, a
        assert_refused(a, code)
        assert isinstance(a["error"]["message"], str) and a["error"]["message"]
        if rid is not None:
            assert a["id"] == rid
        else:
            assert a.get("id") is None
        h = c.call({"verb": "hello", "id": 99})
        assert h["ok"] is True and h["type"] == "hello" and h["id"] == 99
    alive(shared)


def test_all_bad_lines_on_one_connection(shared):
    with Raw(shared) as c:
        c.send(b"".join(line + b"\n" for line, _, _ in BAD) + b'{"verb":"hello","id":"end"}\n')
        codes = [c.recv()["error"]["code"] for _ in BAD]
        assert codes == [code for _, code, _ in BAD]
        assert c.recv()["id"] == "end"


def test_unknown_event_kind_is_refused(shared):
    with Raw(shared) as c:
        a = c.call({"verb": "events", "kind": "no/such", "id": 1})
        assert_refused(a, "bad-request")
        assert a["id"] == 1, a
        assert c.call({"verb": "hello"})["ok"] is True


def test_line_longer_than_the_frame_cap_closes_the_connection(shared):
    cap = alive(shared)["caps"]["frame_bytes"]
    with Raw(shared, timeout=60) as c:
        c.send(b"x" * (cap + 1))
        a = c.recv()
        assert_refused(a, "frame-too-long")
        assert str(cap) in a["error"]["message"]
        assert c.eof()
    alive(shared)


def test_line_longer_than_the_cap_with_newline(shared):
    cap = alive(shared)["caps"]["frame_bytes"]
    with Raw(shared, timeout=60) as c:
        try:
            c.send(b'{"verb":"hello","pad":"' + b"y" * cap + b'"}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still writing: fine
        a = c.recv()
        assert_refused(a, "frame-too-long")
        assert c.eof()
    alive(shared)


def test_line_of_exactly_the_frame_cap_is_served(shared):
    cap = alive(shared)["caps"]["frame_bytes"]
    head, tail = b'{"verb":"hello","id":"big","pad":"', b'"}'
    line = head + b"z" * (cap - len(head) - len(tail)) + tail
    assert len(line) == cap
    with Raw(shared, timeout=60) as c:
        c.send(line + b"\n")
        a = c.recv()
        assert a["ok"] is True and a["id"] == "big"
        assert c.call({"verb": "hello", "id": 2})["id"] == 2


# ---------------------------------------------------------------- many clients


def test_silent_and_stuck_clients_do_not_block_others(daemon):
    half = Raw(daemon)
    half.send(b'{"verb":"mail/send","to":"bob","bo')  # half a line, then nothing
    mute = Raw(daemon)  # connects and says nothing at all
    # A client that pipelines requests and never reads the answers: its socket buffers
    # fill and its task in the daemon blocks writing. Non-blocking, so we never block.
    greedy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    greedy.connect(os.path.join(daemon.dir, "benchd.sock"))
    greedy.setblocking(False)
    req = b'{"verb":"mail/list","handle":"bob","limit":500}\n' + b'{"verb":"hello"}\n' * 4
    written = 0
    try:
        for _ in range(20_000):
            try:
                written += greedy.send(req)
            except BlockingIOError:
                break
        start = time.monotonic()
        a = daemon.ok("mail", "send", "bob", "-m", "still served", timeout=DEADLINE)
        listed = daemon.ok("mail", "list", "--handle", "bob", timeout=DEADLINE)
        assert a["mail_id"] in [m["mail_id"] for m in listed["messages"]]
        with Raw(daemon) as c:
            assert c.call({"verb": "hello", "id": 1})["ok"] is True
        assert time.monotonic() - start < DEADLINE
        assert written > 0
    finally:
        greedy.close()
        half.close()
        mute.close()
    alive(daemon)


def test_fifty_pipelined_requests_answered_in_order(shared, who):
    reqs = []
    for i in range(1, 51):
        if i % 5 == 0:
            reqs.append({"verb": "mail/send", "to": who, "body": f"n{i}", "id": i})
        elif i % 5 == 1:
            reqs.append({"verb": "mail/list", "handle": who, "id": i})
        elif i % 5 == 2:
            reqs.append({"verb": "nope", "id": i})
        else:
            reqs.append({"verb": "hello", "id": i})
    with Raw(shared) as c:
        c.send(b"".join(json.dumps(r).encode() + b"\n" for r in reqs))
        answers = [c.recv() for _ in reqs]
    assert [a["id"] for a in answers] == list(range(1, 51))
    sent = [a["mail_id"] for a in answers if a.get("type") == "mail/send"]
    assert len(sent) == 10 and sent == sorted(sent)
    for r, a in zip(reqs, answers, strict=True):
        if r["verb"] == "nope":
            assert_refused(a, "unknown-verb")
        else:
            assert a["ok"] is True and a["type"] == r["verb"]
    # Each listing saw exactly the sends before it on this connection.
    for i, a in enumerate(answers, 1):
        if reqs[i - 1]["verb"] == "mail/list":
            assert a["total"] == (i - 1) // 5


# ---------------------------------------------------------------- events


def test_events_follow_delivers_live(daemon):
    with Raw(daemon) as f:
        f.send(b'{"verb":"events","follow":true,"id":"f"}\n')
        first = f.recv()
        assert first["type"] == "event" and first["id"] == "f"
        assert first["event"]["kind"] == "daemon/started"
        # The follower is registered: now send from another connection.
        a = daemon.ok("mail", "send", "bob", "-m", "live")
        while True:
            frame = f.recv()
            assert frame["ok"] is True and frame["type"] == "event" and frame["id"] == "f"
            ev = frame["event"]
            if ev["kind"] == "mail/sent":
                break
        assert ev["mail_id"] == a["mail_id"] and ev["to"] == "bob" and ev["from"] == "operator"
        assert ev["seq"] > first["event"]["seq"]
        daemon.ok("mail", "read", "--handle", "bob")
        ev = f.recv()["event"]
        assert ev["kind"] == "mail/read" and ev["mail_id"] == a["mail_id"]
    alive(daemon)


def test_events_follow_with_kind(daemon):
    with Raw(daemon) as f:
        f.send(b'{"verb":"events","follow":true,"kind":"mail/read","id":2}\n')
        a = daemon.ok("mail", "send", "bob", "-m", "x")
        daemon.ok("mail", "read", "--handle", "bob")
        frame = f.recv()
        assert frame["event"]["kind"] == "mail/read"
        assert frame["event"]["mail_id"] == a["mail_id"]
    alive(daemon)


def read_stream(c: Raw, req: dict) -> list[dict]:
    c.send(json.dumps(req).encode() + b"\n")
    out = []
    while True:
        a = c.recv()
        assert a["ok"] is True, a
        assert a["id"] == req.get("id")
        if a["type"] == "end":
            return out
        assert a["type"] == "event"
        out.append(a["event"])


def test_events_since_and_kind(daemon):
    ids = [daemon.ok("mail", "send", "bob", "-m", str(i))["mail_id"] for i in range(3)]
    daemon.ok("mail", "read", ids[0], "--handle", "bob")
    with Raw(daemon) as c:
        every = read_stream(c, {"verb": "events", "id": 1})
        seqs = [e["seq"] for e in every]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        kinds = [e["kind"] for e in every]
        assert kinds[0] == "daemon/started"
        assert kinds.count("mail/sent") == 3 and kinds.count("mail/read") == 1
        sent = read_stream(c, {"verb": "events", "kind": "mail/sent", "id": 2})
        assert [e["mail_id"] for e in sent] == ids
        for since in [0, *seqs]:
            got = read_stream(c, {"verb": "events", "since": since, "id": 3})
            assert [e["seq"] for e in got] == [s for s in seqs if s > since], since
        mid = sent[1]["seq"]
        got = read_stream(c, {"verb": "events", "since": mid - 1, "kind": "mail/sent", "id": 4})
        assert [e["mail_id"] for e in got] == ids[1:]
        got = read_stream(c, {"verb": "events", "limit": 2, "id": 5})
        assert [e["seq"] for e in got] == seqs[:2]
        assert c.call({"verb": "hello"})["ok"] is True


def test_events_cli_after_and_kind(daemon):
    for i in range(3):
        daemon.ok("mail", "send", "bob", "-m", str(i))
    r = daemon.bench("events", "--json")
    assert r.rc == 0
    evs = [json.loads(x) for x in r.out.splitlines()]
    seqs = [e["seq"] for e in evs]
    r = daemon.bench("events", "--json", "--after", str(seqs[1]))
    assert r.rc == 0
    assert [json.loads(x)["seq"] for x in r.out.splitlines()] == seqs[2:]
    r = daemon.bench("events", "--json", "--kind", "mail/sent")
    assert [json.loads(x)["kind"] for x in r.out.splitlines()] == ["mail/sent"] * 3
    human = daemon.bench("events")
    assert human.rc == 0 and "mail/sent" in human.out and "daemon/started" in human.out


def test_follower_going_away_is_harmless(shared, who):
    for _ in range(3):
        f = Raw(shared)
        f.send(b'{"verb":"events","follow":true}\n')
        assert f.recv()["type"] == "event"
        f.close()
    shared.ok("mail", "send", who, "-m", "after followers left")
    alive(shared)


def test_still_alive_after_abuse(shared):
    for line, _, _ in BAD:
        with Raw(shared) as c:
            c.send(line + b"\n")
            c.recv()
    with Raw(shared) as c:
        c.send(b"\x00" * 1000 + b"\n" + b"\xff" * 1000 + b"\n")
        assert c.recv()["ok"] is False
        assert c.recv()["ok"] is False
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.path.join(shared.dir, "benchd.sock"))
        s.send(b'{"verb":"mail/send","to":"bob"')
        s.close()  # gone mid-line
    a = alive(shared)
    assert a["pid"] == shared.proc.pid


# ---------------------------------------------------------------- limits


def test_largest_body_fully_escaped_fits_in_a_frame(shared, who):
    caps = alive(shared)["caps"]
    body = "\x01" * caps["body_bytes"]  # 6 bytes each once JSON-escaped
    line = json.dumps({"verb": "mail/send", "to": who, "body": body, "id": 1}).encode()
    assert len(line) <= caps["frame_bytes"]
    with Raw(shared, timeout=60) as c:
        c.send(line + b"\n")
        a = c.recv()
    assert a["ok"] is True, a
    with open(a["path"], "rb") as f:
        assert f.read().endswith(b"\n---\n\n" + body.encode())


def test_connection_cap(make_daemon):
    daemon = make_daemon("--max-connections", "2")
    assert alive(daemon)["caps"]["connections"] == 2
    a, b = Raw(daemon), Raw(daemon)
    try:
        assert a.call({"verb": "hello", "id": "a"})["ok"] is True
        assert b.call({"verb": "hello", "id": "b"})["ok"] is True
        with Raw(daemon) as c:
            r = c.recv()  # refused at once, without sending anything
            assert_refused(r, "too-many-connections")
            assert c.eof()
        a.close()

        def slot_back():  # the slot is freed once the daemon has seen `a` go
            with Raw(daemon) as c:
                r = c.call({"verb": "hello", "id": "c"})
            assert r["ok"] or r["error"]["code"] == "too-many-connections", r
            return r["ok"]

        wait_for(slot_back, DEADLINE, "the closed connection's slot to come back")
        assert b.call({"verb": "hello", "id": "b2"})["ok"] is True
    finally:
        a.close()
        b.close()


def test_events_limit_must_be_positive(shared):
    with Raw(shared) as c:
        a = c.call({"verb": "events", "limit": 0, "id": 1})
        assert_refused(a, "bad-limit")
        assert c.call({"verb": "hello"})["ok"] is True


def test_follow_stream_ends_when_the_daemon_stops(daemon):
    with Raw(daemon) as f:
        f.send(b'{"verb":"events","follow":true,"id":"f"}\n')
        assert f.recv()["type"] == "event"
        r = daemon.bench("down")
        assert r.rc == 0, r
        kinds, end = [], None
        while True:
            try:
                frame = f.recv()
            except EOFError:
                break
            if frame.get("type") == "end":
                end = frame
                break
            assert frame["type"] == "event"
            kinds.append(frame["event"]["kind"])
        # The stream ends cleanly: an end frame (or a plain close), never a hang.
        assert end is None or end["id"] == "f"
    assert daemon.proc.wait(timeout=30) == 0
