"""Fuzzing the wire: the decoder as a property, and a live daemon over its socket.

The socket fuzzer sends a bounded number of hostile frames (random bytes, wrong types,
unknown verbs, huge numbers, invalid UTF-8, path-like ids and handles, strings near the
frame cap) through real connections. After every batch the daemon is alive and answers
hello; every answer is an ok frame or an error with a catalogue code (never
`internal`); and nothing appears outside BENCH_DIR: the daemon runs with its cwd in an
empty directory next to BENCH_DIR, inside a sentinel parent that must hold nothing else
afterwards.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench_wire.errors import CODES, WireError
from bench_wire.messages import DEFAULT_FRAME_BYTES, VERBS, decode_request, request_id_of
from tests.conftest import FAST, Benchd
from tests.reliability.common import raw_connect, read_to_eof, recv_lines, tree
from tests.support.daemon import short_tmpdir
from tests.support.refusal import assert_refused

FRAMES = 2000
BATCH = 100
SEED = 4242
MARK = f"zzfuzz{os.getpid()}"

# ------------------------------------------------------------------ the decoder


nested = st.builds(
    lambda depth, opener, wrap: (b'{"verb":"hello","x":' if wrap else b"") + opener * depth,
    st.integers(min_value=1, max_value=120_000),
    st.sampled_from([b"[", b'{"a":', b'[{"a":']),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(nested)
def test_the_decoder_raises_only_wire_error_however_deep_the_nesting(line):
    try:
        decode_request(line)
    except WireError as err:
        assert err.code in CODES
    request_id_of(line)  # best effort: never raises


# ------------------------------------------------------------------ a daemon in a sandbox


@pytest.fixture
def sandbox():
    parent = short_tmpdir("bf")
    bench_dir, cwd = os.path.join(parent, "d"), os.path.join(parent, "cwd")
    os.mkdir(cwd)
    d = Benchd(bench_dir, list(FAST), cwd=cwd)
    d.start()
    try:
        yield d, parent
    finally:
        if d.proc is not None:
            d.stop()
        shutil.rmtree(parent, ignore_errors=True)


def alive_and_answering(d) -> None:
    assert d.proc.poll() is None, f"benchd died: {d.proc.stderr.read()[-4000:]}"
    h = d.call({"verb": "hello"})
    assert h["ok"] is True and h["pid"] == d.proc.pid


def nothing_outside(d, parent: str) -> None:
    assert os.listdir(d.cwd) == [], f"written into the daemon's cwd: {os.listdir(d.cwd)}"
    outside = {p for p in tree(parent) if p != "d" and not p.startswith("d/") and p != "cwd"}
    assert outside == set(), f"written outside BENCH_DIR: {outside}"
    for where in ("/tmp", "/", "/etc", parent, os.path.dirname(d.cwd), d.dir):
        assert not [n for n in os.listdir(where) if MARK in n], where
    assert not [p for p in tree(d.dir) if MARK in p]
    mail = os.path.join(d.dir, "mail")
    if os.path.isdir(mail):
        from benchd.core.names import is_handle

        assert all(is_handle(h) for h in os.listdir(mail)), os.listdir(mail)


# ------------------------------------------------------------------ frames

PATHS = [
    "../../etc",
    "/etc/passwd",
    "a/../../b",
    "..",
    ".",
    "../" * 20 + MARK,
    "/tmp/" + MARK,
    f"a/../../{MARK}",
    f"..\\..\\{MARK}",
    f"{MARK}/../..",
    f"./{MARK}",
    "\x00" + MARK,
    f"{MARK}\x00/etc",
    "~/" + MARK,
    "%2e%2e%2f" + MARK,
    "\u2025/" + MARK,
    "",
    "20261130T045611.123Z-0001/../../x",
    "20261130T045611.123Z-0001\n",
    "A" * 300,
]
ODD_VERBS = [
    "",
    "HELLO",
    "hello ",
    "mail/",
    "mail/../hello",
    "/etc/passwd",
    "stop2",
    "\x00",
    "mail/send\x00",
    "events/../stop",
    "debug",
    "🙂",
]
# A valid wait blocks until its timeout (minutes by default): the fuzzer sends waits
# only through json_frame, which keeps their timeout short or of a wrong type.
WAIT_VERBS = ("mail/wait", "job/wait")
SAFE_VERBS = [v for v in VERBS if v not in ("stop", "debug/fault", *WAIT_VERBS)]
FIELDS = [
    "to",
    "body",
    "subject",
    "key",
    "reply_to",
    "in_reply_to",
    "handle",
    "mail_id",
    "state",
    "limit",
    "cursor",
    "since",
    "kind",
    "argv",
    "name",
    "cwd",
    "env",
    "ready",
    "rows",
    "cols",
    "job",
    "text",
    "enter",
    "screen",
    "cancel",
    "content",
    "data",
    "token",
    "id",
    "from",
    "sender",
    "point",
    "errno",
    "count",
]


def scalar(rng: random.Random):
    return rng.choice(
        [
            lambda: rng.choice(PATHS),
            lambda: rng.randint(-(2**70), 2**70),
            lambda: 10**400 * rng.choice([1, -1]),
            lambda: rng.choice([0.5, -1e308, 1e308, 1e-320]),
            lambda: rng.choice([True, False, None]),
            lambda: "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 30))),
            lambda: rng.choice(["bob", "operator", "alice.x-1_", "unread", "read", "all"]),
        ]
    )()


def value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth < 4 and r < 0.15:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 4 and r < 0.25:
        return {rng.choice(FIELDS): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return scalar(rng)


def json_frame(rng: random.Random) -> bytes:
    r = rng.random()
    verb = rng.choice(SAFE_VERBS) if r < 0.75 else rng.choice(WAIT_VERBS if r < 0.8 else ODD_VERBS)
    obj: dict = {"verb": verb}
    for _ in range(rng.randint(0, 5)):
        obj[rng.choice(FIELDS)] = value(rng)
    # A spawn never starts anything real: the command is one that does not exist.
    if verb == "session/spawn" and (rng.random() < 0.7 or isinstance(obj.get("argv"), list)):
        obj["argv"] = [f"/nonexistent-{MARK}/bin", "x"]
    if verb in ("events", "session/tail"):
        obj.pop("follow", None)  # a follow stream never ends by itself
    if verb in WAIT_VERBS:  # short, or of a wrong type or sign (refused at once)
        obj["timeout"] = rng.choice([0, 0.01, -1, "x", None])
    if verb == "session/attach":
        obj["handle"] = f"no-such-{rng.randint(0, 9)}"
    if rng.random() < 0.3:
        obj["id"] = rng.choice([1, "x", 10**400, -5, None, PATHS[0]])
    return json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def raw_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(10)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    if kind == 1:
        num = rng.choice(
            [
                b"1e999999",
                b"-1e999999",
                b"1" + b"0" * 400,
                b"1" + b"0" * 5000,
                b"-0",
                b"1E+2147483648",
                b"0.000000000000000000000000000001e-400",
                b"NaN",
                b"Infinity",
                b"0x10",
                b"01",
            ]
        )
        field = rng.choice([b"limit", b"since", b"id", b"rows", b"count", b"x"])
        verb = rng.choice([b"mail/list", b"events", b"hello", b"session/spawn"])
        return b'{"verb":"' + verb + b'","' + field + b'":' + num + b"}"
    if kind == 2:
        bad = rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"])
        return b'{"verb":"mail/send","to":"bob","body":"' + bad + b'"}'
    if kind == 3:
        esc = rng.choice([b"\\ud800", b"\\udfff", b"\\u0000", b"\\x41", b"\\", b"\\u12"])
        return b'{"verb":"mail/send","to":"bob","subject":"' + esc + b'","body":"x"}'
    if kind == 4:
        return rng.choice(
            [
                b"null",
                b"[]",
                b"42",
                b'"hello"',
                b"{",
                b"}",
                b'{"verb":}',
                b'{"verb":"hello"}{"verb":"hello"}',
                b'{"verb":"hello",}',
                b'\xef\xbb\xbf{"verb":"hello"}',
                b'{"verb":"hello","verb":"x"}',
                b"{'verb':'hello'}",
                b"\t \r",
            ]
        )
    if kind == 5:  # path-like ids and handles, in the fields that name things
        p = rng.choice(PATHS)
        return json.dumps(
            rng.choice(
                [
                    {"verb": "mail/send", "to": p, "body": "x"},
                    {"verb": "mail/send", "to": "bob", "body": "x", "reply_to": [p]},
                    {"verb": "mail/send", "to": "bob", "body": "x", "in_reply_to": p},
                    {"verb": "mail/send", "to": "bob", "body": "x", "key": p or "k"},
                    {"verb": "mail/read", "mail_id": p},
                    {"verb": "mail/read", "handle": p},
                    {"verb": "mail/read", "handle": "bob", "mail_id": p},
                    {"verb": "mail/list", "handle": p},
                    {"verb": "mail/list", "handle": "bob", "cursor": p},
                    {"verb": "session/tail", "handle": p},
                    {"verb": "session/kill", "handle": p},
                    {"verb": "session/type", "handle": p, "text": "x"},
                    {"verb": "session/spawn", "argv": [f"/nonexistent-{MARK}"], "name": p},
                    {"verb": "session/spawn", "argv": [f"/nonexistent-{MARK}"], "cwd": p},
                    {"verb": "events", "kind": p},
                    {"verb": "job/report", "content": p},
                ]
            )
        ).encode()
    if kind == 6:  # wrong types for known fields
        verb = rng.choice(SAFE_VERBS)
        return json.dumps(
            {
                "verb": verb,
                rng.choice(FIELDS): rng.choice(
                    [[], {}, 1, "s", True, None, [[1]], {"a": {"b": []}}, 1.5]
                ),
            }
        ).encode()
    if kind == 8:  # nesting, shallow enough that any decoder should cope
        depth = rng.randint(10, 300)
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        inner = opener * depth + b"1" + closer * depth * rng.randint(0, 1)
        return rng.choice(
            [
                inner,
                b'{"verb":"hello","x":' + inner + b"}",
                b'{"verb":"mail/send","to":"bob","body":' + inner + b"}",
            ]
        )
    if kind == 7:  # a second object, a comment, trailing bytes
        return rng.choice(
            [
                b'{"verb":"hello"} x',
                b'{"verb":"hello"}//c',
                b'{"verb":"hello"}\x00',
                b'  {"verb":"hello"}  ',
                b'{"verb":"hello"}\r',
            ]
        )
    return json_frame(rng)  # kind 9


def frames(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        f = json_frame(rng) if rng.random() < 0.5 else raw_frame(rng)
        yield f.replace(b"\n", b" ")


class Client:
    """One fuzzing connection; reconnects when the daemon closes it."""

    def __init__(self, d):
        self.d = d
        self.sock: socket.socket | None = None
        self.buf = bytearray()

    def answer(self, frame: bytes) -> list[dict]:
        if self.sock is None:
            self.sock, self.buf = raw_connect(self.d.dir, timeout=20), bytearray()
        self.sock.sendall(frame + b"\n")
        if not frame.strip():
            return []  # a blank line is skipped by the daemon: no answer is due
        out = []
        while True:
            (line,) = recv_lines(self.sock, 1, self.buf)
            obj = json.loads(line)
            out.append(obj)
            if obj.get("type") not in ("event", "output", "screen"):
                return out

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def check_answer(frame: bytes, answers: list[dict], codes: dict) -> None:
    for a in answers:
        assert isinstance(a, dict) and isinstance(a.get("ok"), bool), (frame[:200], a)
    last = answers[-1]
    if last["ok"]:
        codes["ok"] = codes.get("ok", 0) + 1
        return
    err = last.get("error") or {}
    code, message = err.get("code"), err.get("message")
    assert code in CODES, (frame[:200], last)
    assert code != "internal", f"internal error for {frame[:300]!r}: {last}"
    assert isinstance(message, str) and len(message) > 5, (frame[:200], last)
    codes[code] = codes.get(code, 0) + 1


def test_socket_fuzzer_never_kills_or_escapes_the_daemon(sandbox):
    d, parent = sandbox
    codes: dict[str, int] = {}
    sent = 0
    clients = [Client(d) for _ in range(3)]
    try:
        batch: list[bytes] = []
        for i, frame in enumerate(frames(FRAMES, SEED)):
            c = clients[i % len(clients)]
            try:
                answers = c.answer(frame)
            except (EOFError, ConnectionError, TimeoutError) as err:
                pytest.fail(
                    f"no answer to frame {i} {frame[:300]!r}: {err}; "
                    f"benchd alive: {d.proc.poll() is None}; recent: {batch[-3:]!r}"
                )
            if answers:
                check_answer(frame, answers, codes)
            else:
                codes["(blank: no answer)"] = codes.get("(blank: no answer)", 0) + 1
            sent += 1
            batch.append(frame[:200])
            if len(batch) == BATCH:
                alive_and_answering(d)
                batch = []
    finally:
        for c in clients:
            c.close()
    alive_and_answering(d)
    nothing_outside(d, parent)
    print(
        f"\nfuzzed {sent} frames over the socket; answers by code: "
        f"{dict(sorted(codes.items(), key=lambda kv: -kv[1]))}"
    )
    assert sent == FRAMES


@pytest.mark.parametrize(
    "size",
    [
        DEFAULT_FRAME_BYTES - 64,
        DEFAULT_FRAME_BYTES,
        DEFAULT_FRAME_BYTES + 1,
        3 * DEFAULT_FRAME_BYTES,
    ],
)
def test_frames_near_the_cap(sandbox, size):
    d, parent = sandbox
    head = b'{"verb":"mail/send","to":"bob","body":"'
    tail = b'"}'
    frame = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(frame) == size
    s = raw_connect(d.dir, timeout=30)
    try:
        try:
            s.sendall(frame + b"\n" + b'{"verb":"hello","id":7}\n')
            s.shutdown(socket.SHUT_WR)
        except BrokenPipeError:
            pass  # over the cap: the daemon answered and closed while we were still sending
        answers = [json.loads(x) for x in read_to_eof(s).splitlines()]
    finally:
        s.close()
    if size <= DEFAULT_FRAME_BYTES:
        # Within the frame cap: a clear refusal of the body, and the connection goes on.
        assert_refused(answers[0], "body-too-large")
        assert answers[1]["ok"] is True and answers[1]["id"] == 7, answers
    else:
        (a,) = answers  # the error, then the connection is closed
        assert_refused(a, "frame-too-long")
    alive_and_answering(d)
    nothing_outside(d, parent)


@pytest.mark.parametrize(
    "frame",
    [
        b"[" * 100_000,
        b"[" * 5_000 + b"]" * 5_000,
        b'{"verb":"hello","x":' + b"[" * 100_000,
        b'{"verb":"mail/send","to":"bob","body":' + b'{"a":' * 50_000,
    ],
    ids=["100k-open-brackets", "5k-balanced", "deep-unknown-field", "deep-body"],
)
def test_deep_nesting_is_refused_and_the_daemon_survives(sandbox, frame):
    d, parent = sandbox
    s = raw_connect(d.dir, timeout=20)
    try:
        s.sendall(frame + b"\n" + b'{"verb":"hello","id":9}\n')
        (first, second) = [json.loads(x) for x in recv_lines(s, 2)]
    except (EOFError, ConnectionError) as err:
        pytest.fail(
            f"the daemon dropped the connection on a deeply nested frame ({err}); "
            f"benchd alive: {d.proc.poll() is None}"
        )
    finally:
        s.close()
    assert_refused(first, "bad-json", "bad-request", "not-object")
    assert second["ok"] is True and second["id"] == 9
    alive_and_answering(d)
    nothing_outside(d, parent)
