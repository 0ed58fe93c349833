"""Load: many sessions, many concurrent clients, hostile slow clients, connection cap.

- 50 live sessions (40 `sleep 600`, 10 stand-in TUI agents with a ready pattern, so
  wakes land in those) and 20 sender processes for a bounded time: every acknowledged
  message is delivered once (files and list totals), the wake cap holds per recipient
  (--wake-burst 3 --wake-refill 3600: at most 3 wakes each), no client is starved, and
  a client that never reads and one that sends a line a byte per second slow no one.
- --max-connections 8: the 9th connection gets too-many-connections and is closed;
  closing some makes room again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from bench_wire.client import Client
from bench_wire.errors import WireError
from tests.conftest import standin_argv, wait_for
from tests.reliability.common import (
    ROOT,
    concurrent_calls,
    raw_connect,
    scan_mail,
)
from tests.support.daemon import UNLIMITED
from tests.support.refusal import assert_refused
from tools.reliability.crashloop import read_acks

pytestmark = pytest.mark.slow  # seconds of load from many clients

BURST = 3
CLIENTS = 20
LOAD_SECONDS = 5.0
MAX_LATENCY = 3.0  # no acknowledged send may take longer than this, hostile clients or not


def spawn(d, name: str, argv: list[str], ready: str | None = None) -> dict:
    req = {"verb": "session/spawn", "argv": argv, "name": name}
    if ready:
        req["ready"] = ready
    a = d.call(req)
    assert a.get("ok") is True, a
    return a


class NeverReads:
    """Connects, asks for the whole event log many times over, never reads an answer."""

    def __init__(self, bench_dir: str):
        self.sock = raw_connect(bench_dir)
        line = json.dumps({"verb": "events", "since": 0}).encode() + b"\n"
        self.sock.setblocking(False)
        self.sent = 0
        try:
            for _ in range(2000):
                self.sock.send(line)
                self.sent += 1
        except BlockingIOError:
            pass  # its own send buffer is full too: it is well and truly stuck

    def close(self) -> None:
        self.sock.close()


class Trickle(threading.Thread):
    """Sends a request line one byte per second until stopped."""

    def __init__(self, bench_dir: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.sock = raw_connect(bench_dir)
        self.stop = stop
        self.bytes = 0

    def run(self) -> None:
        line = json.dumps({"verb": "mail/send", "to": "bob", "body": "x" * 200}).encode()
        for b in line:
            if self.stop.is_set():
                break
            self.sock.send(bytes([b]))
            self.bytes += 1
            self.stop.wait(1.0)  # pacing of the hostile client, not synchronisation

    def close(self) -> None:
        self.sock.close()


def test_fifty_sessions_twenty_clients_and_hostile_ones(make_daemon, tmp_path):
    # Twenty clients as fast as they go: the sender limits would refuse most of it.
    d = make_daemon("--wake-burst", str(BURST), "--wake-refill", "3600", *UNLIMITED)
    sleepers = [f"s{i:02d}" for i in range(40)]
    agents = [f"a{i:02d}" for i in range(10)]
    pids = []
    for h in sleepers:
        pids.append(spawn(d, h, ["sleep", "600"])["pid"])
    for h in agents:
        pids.append(
            spawn(d, h, standin_argv("--record", str(tmp_path / f"{h}.rec")), ready="standin>")[
                "pid"
            ]
        )
    assert d.call({"verb": "hello"})["sessions"] == 50
    recipients = sleepers + agents + ["offline0", "offline1", "operator"]

    stop = threading.Event()
    hog = NeverReads(d.dir)
    trickle = Trickle(d.dir, stop)
    trickle.start()
    stop_file = str(tmp_path / "STOP")
    env = d.env(PYTHONPATH=ROOT)
    procs = []
    t0 = time.monotonic()
    try:
        for i in range(CLIENTS):
            cmd = [
                sys.executable,
                "-m",
                "tools.reliability.sender",
                "--dir",
                d.dir,
                "--name",
                f"l{i:02d}",
                "--out",
                str(tmp_path / f"acks-{i}.jsonl"),
                "--stop",
                stop_file,
                "--to",
                ",".join(recipients),
                "--seed",
                "7",
                "--body-max",
                "200",
                "--max-seconds",
                str(LOAD_SECONDS),
                "--reconnect-timeout",
                "5",
            ]
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for p in procs:
            p.wait(LOAD_SECONDS + 60)
        elapsed = time.monotonic() - t0
        # The hostile clients were still hanging on all along.
        assert trickle.is_alive() and hog.sent > 0
        h = d.call({"verb": "hello"})
        assert h["ok"] is True and d.proc.poll() is None
    finally:
        stop.set()
        hog.close()
        trickle.join(5)
        trickle.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    per_client, acked, problems = [], {}, []
    for i, p in enumerate(procs):
        acks, errors, summaries = read_acks(str(tmp_path / f"acks-{i}.jsonl"))
        if p.returncode != 0 or errors:
            problems.append(f"client {i}: rc={p.returncode} {errors[:3]} {p.stderr.read()}")
        p.stderr.close()
        (summary,) = summaries
        assert summary["unknown"] == 0, summary  # no connection ever broke
        per_client.append(summary)
        for a in acks:
            acked[a["key"]] = a
    assert problems == []
    counts = [s["acked"] for s in per_client]
    worst = max(s["max_ms"] for s in per_client) / 1000
    print(
        f"\nload: {len(acked)} messages acknowledged by {CLIENTS} clients in "
        f"{elapsed:.1f}s (per client min {min(counts)}, max {max(counts)}); "
        f"slowest acknowledged send {worst:.2f}s; trickle sent {trickle.bytes} bytes, "
        f"the never-reading client queued {hog.sent} requests"
    )
    assert min(counts) >= 5 and min(counts) * 10 >= sum(counts) / CLIENTS, counts
    assert worst < MAX_LATENCY, per_client

    # Every acknowledged message delivered once, byte for byte (inbox or, woken, read/).
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == []
    by_key = scan.by_key()
    for key, a in acked.items():
        msgs = by_key.get(("operator", key), [])
        assert len(msgs) == 1, (key, msgs)
        assert msgs[0]["meta"]["id"] == a["mail_id"] and msgs[0]["body"] == a["body"].encode()
    for r in recipients:
        want = sum(1 for a in acked.values() if a["to"] == r)
        assert scan.count(r) == want, r
        a = d.call({"verb": "mail/list", "handle": r, "state": "all", "limit": 1})
        assert a["total"] == want, (r, a)

    # Wakes land in the agents, and the cap holds for every recipient.
    for h in agents:
        if sum(1 for a in acked.values() if a["to"] == h) >= BURST:
            d.wait_until(
                lambda h=h: (
                    len([e for e in d.events(kind="agent/woken") if e["handle"] == h]) >= BURST
                ),
                30,
                f"{BURST} wakes for {h}",
            )
    elapsed = time.monotonic() - t0
    allowed = BURST + int(elapsed / 3600)
    woken: dict[str, int] = {}
    for e in d.events(kind="agent/woken"):
        woken[e["handle"]] = woken.get(e["handle"], 0) + 1
    assert all(n <= allowed for n in woken.values()), woken
    assert not any(h in woken for h in sleepers), woken  # never printed: never idle
    capped = {e["handle"] for e in d.events(kind="wake/capped")}
    for h in sleepers + agents:
        if sum(1 for a in acked.values() if a["to"] == h) > BURST:
            assert h in capped, h
    print(
        f"wakes: {sum(woken.values())} delivered to {len(woken)} agents (cap {allowed} "
        f"each); {len(capped)} recipients capped"
    )


# ------------------------------------------------------------------ connection cap


def test_the_connection_cap_refuses_the_ninth_and_recovers(make_daemon):
    d = make_daemon("--max-connections", "8")
    held = [Client(d.dir) for _ in range(8)]
    try:
        for c in held:  # each answered: each is counted
            h = c.call({"verb": "hello"})
            assert h["caps"]["connections"] == 8
        ninth = Client(d.dir)
        a = ninth.recv()
        assert_refused(a, "too-many-connections")
        assert "8" in a["error"]["message"]
        with pytest.raises(WireError):
            ninth.recv()  # and it is closed
        ninth.close()
        # The held ones still work.
        assert all(c.call({"verb": "hello"})["ok"] for c in held)

        for c in held[:3]:
            c.close()
        del held[:3]

        def admitted():
            c = Client(d.dir)
            try:
                if c.call({"verb": "hello"})["ok"]:
                    return c
            except WireError:
                pass
            c.close()
            return None

        for _ in range(3):
            held.append(wait_for(admitted, 10, "a connection to be admitted again"))
        assert len(held) == 8
        tenth = Client(d.dir)
        assert_refused(tenth.recv(), "too-many-connections")
        tenth.close()
    finally:
        for c in held:
            c.close()
    # All closed: a full set of 8 fits again.
    again = []
    try:
        for _ in range(8):
            again.append(wait_for(admitted, 10, "connections after all closed"))
    finally:
        for c in again:
            c.close()
    assert os.path.exists(os.path.join(d.dir, "benchd.sock")) and d.proc.poll() is None


# ------------------------------------------------------------------ one key, many retries


def test_concurrent_retries_of_one_key_make_one_message_and_true_answers(daemon):
    """Several connections send the same key at the same instant (a client retrying on
    fresh connections): one message, one id for all, one non-duplicate answer, and every
    answer's path names the file where it really is. Bounded rounds."""
    d = daemon
    n, rounds = 4, 30
    wrong_paths = []
    for t in range(rounds):
        answers = concurrent_calls(
            d.dir,
            [{"verb": "mail/send", "to": "bob", "body": f"once {t}", "key": f"retry-{t}"}] * n,
        )
        assert all(a is not None and a["ok"] for a in answers), answers
        assert len({a["mail_id"] for a in answers}) == 1, answers
        assert sum(not a["duplicate"] for a in answers) == 1, answers
        mine = [m for m in scan_mail(d.dir).messages if m["meta"]["key"] == f"retry-{t}"]
        assert len(mine) == 1 and mine[0]["meta"]["id"] == answers[0]["mail_id"]
        wrong_paths += [
            (a["path"], mine[0]["path"]) for a in answers if a["path"] != mine[0]["path"]
        ]
    assert wrong_paths == [], (
        f"{len(wrong_paths)} answers named a path where the message is not "
        f"(answered, actual): {wrong_paths[:3]}"
    )
