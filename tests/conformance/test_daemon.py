"""benchd as a process: the directory, the lock, the socket, the event
log, crash recovery, and stopping."""

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
import yaml

from bench_wire.client import Client
from bench_wire.errors import WireError
from tests.conftest import Benchd
from tests.support.refusal import assert_refused


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def log_lines(daemon) -> list[bytes]:
    with open(os.path.join(daemon.dir, "events.jsonl"), "rb") as f:
        data = f.read()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


def parsed_log(daemon, torn_allowed: int = 0) -> list[dict]:
    """Every line of events.jsonl decoded; at most `torn_allowed` lines may not parse."""
    out, bad = [], []
    for line in log_lines(daemon):
        try:
            obj = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        assert isinstance(obj, dict)
        out.append(obj)
    assert len(bad) <= torn_allowed, bad
    return out


def check_log_shape(events: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert all(isinstance(s, int) for s in seqs)
    assert all(a < b for a, b in zip(seqs, seqs[1:], strict=False)), seqs
    now = time.time() * 1000
    for e in events:
        assert isinstance(e["ts"], int) and abs(e["ts"] - now) < 3_600_000, e
        assert isinstance(e["kind"], str) and "/" in e["kind"]


@pytest.fixture
def own_daemons():
    """Daemons a test builds by hand on other directories; stopped at the end."""
    made: list[Benchd] = []
    yield made
    for b in made:
        if b.proc is not None:
            b.stop()


# ---------------------------------------------------------------- directory and socket


def test_bench_dir_created_0700_and_socket_0600(bench_dir, own_daemons):
    d = os.path.join(bench_dir, "new", "state")
    b = Benchd(d, [])
    own_daemons.append(b)
    b.start()
    assert mode(d) == 0o700
    sock = os.path.join(d, "benchd.sock")
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert mode(sock) == 0o600
    assert mode(os.path.join(d, "events.jsonl")) & 0o077 == 0
    a = b.ok("mail", "send", "bob", "-m", "x")
    assert mode(a["path"]) & 0o077 == 0


def test_an_open_bench_dir_is_tightened(bench_dir, own_daemons):
    os.chmod(bench_dir, 0o755)
    b = Benchd(bench_dir, [])
    own_daemons.append(b)
    b.start()
    assert mode(bench_dir) == 0o700


def test_second_daemon_on_the_same_dir_refused(shared, who):
    first = shared.ok("status")
    proc = subprocess.run(
        [sys.executable, "-m", "benchd.server.app", "--dir", shared.dir],
        capture_output=True,
        text=True,
        timeout=30,
        env=shared.env(),
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    msg = proc.stderr.strip()
    assert len(msg.splitlines()) == 1 and shared.dir in msg and "benchd" in msg
    assert shared.proc.poll() is None
    again = shared.ok("status")
    assert again["pid"] == first["pid"] == shared.proc.pid
    shared.ok("mail", "send", who, "-m", "still serving")


def test_bench_up_on_a_running_dir_is_a_no_op(shared):
    a = shared.ok("up")
    assert a["pid"] == shared.proc.pid


def test_stale_regular_file_at_socket_path_replaced(make_daemon, bench_dir):
    sock = os.path.join(bench_dir, "benchd.sock")
    with open(sock, "w") as f:
        f.write("stale")
    b = make_daemon()
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert b.ok("status")["pid"] == b.proc.pid


def test_stale_socket_of_a_dead_daemon_replaced(make_daemon, bench_dir):
    sock = os.path.join(bench_dir, "benchd.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.close()  # bound, never listening, closed: what a dead daemon leaves
    assert os.path.exists(sock)
    r = Benchd(bench_dir, []).bench("status")
    assert r.rc == 3  # nobody answers there
    b = make_daemon()
    assert b.ok("status")["pid"] == b.proc.pid


def test_stale_socket_after_kill9_replaced(daemon):
    daemon.kill9()
    assert os.path.exists(os.path.join(daemon.dir, "benchd.sock"))
    r = daemon.bench("status")
    assert r.rc == 3
    daemon.start()
    assert daemon.ok("status")["pid"] == daemon.proc.pid


def test_benchd_log_exists(shared, who):
    shared.ok("mail", "send", who, "-m", "x")
    path = os.path.join(shared.dir, "benchd.log")
    assert os.path.isfile(path)
    with open(path) as f:
        text = f.read()
    assert text.strip()
    assert str(shared.proc.pid) in text


# ---------------------------------------------------------------- event log


def test_event_log_lines(daemon):
    a = daemon.ok("mail", "send", "bob", "-s", "s", "-m", "x")
    daemon.ok("mail", "read", "--handle", "bob")
    pid = daemon.proc.pid
    daemon.stop()
    events = parsed_log(daemon)
    check_log_shape(events)
    for line in log_lines(daemon):
        assert line.startswith(b'{"seq":')  # seq first: the log is searchable by offset
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "daemon/started" and kinds[-1] == "daemon/stopped"
    assert {"daemon/started", "mail/sent", "mail/read", "daemon/stopped"} <= set(kinds)
    started = events[0]
    assert started["pid"] == pid and started["seq"] >= 1
    sent = [e for e in events if e["kind"] == "mail/sent"]
    assert len(sent) == 1
    assert sent[0]["mail_id"] == a["mail_id"] and sent[0]["to"] == "bob"
    assert sent[0]["from"] == "operator" and sent[0]["path"] == a["path"]
    assert sent[0]["key"] == a["key"]
    read = [e for e in events if e["kind"] == "mail/read"]
    assert len(read) == 1 and read[0]["mail_id"] == a["mail_id"]
    assert events[-1]["pid"] == pid


def test_events_logged_before_the_answer(shared, who):
    a = shared.ok("mail", "send", who, "-m", "x")
    # The answer is back: the fact is already in the file (no waiting).
    assert any(
        e.get("mail_id") == a["mail_id"] and e["kind"] == "mail/sent" for e in parsed_log(shared)
    )


def test_seq_continues_across_restarts(daemon):
    daemon.ok("mail", "send", "bob", "-m", "x")
    daemon.restart()
    daemon.ok("mail", "send", "bob", "-m", "y")
    daemon.stop()
    events = parsed_log(daemon)
    check_log_shape(events)
    assert [e["kind"] for e in events].count("daemon/started") == 2


def test_torn_last_line_tolerated_at_restart(daemon):
    daemon.ok("mail", "send", "bob", "-m", "x")
    daemon.stop()
    before = parsed_log(daemon)
    top = max(e["seq"] for e in before)
    path = os.path.join(daemon.dir, "events.jsonl")
    with open(path, "ab") as f:
        f.write(b'{"seq": 99')  # torn: no newline
    with open(path, "rb") as f:
        raw_before = f.read()
    daemon.start()
    a = daemon.ok("mail", "send", "bob", "-m", "after the tear")
    with open(path, "rb") as f:
        raw = f.read()
    assert raw.startswith(raw_before)  # never rewritten: only appended to
    events = parsed_log(daemon, torn_allowed=1)
    assert events[: len(before)] == before
    after = events[len(before) :]
    assert after and after[0]["kind"] == "daemon/started"
    assert all(e["seq"] > top for e in after)
    check_log_shape(events)
    seqs = [e["seq"] for e in daemon.events()]
    assert seqs == [e["seq"] for e in events]
    sent = daemon.events(kind="mail/sent")
    assert sent[-1]["mail_id"] == a["mail_id"] and sent[-1]["seq"] > top


# ---------------------------------------------------------------- crash recovery


def test_kill9_loses_no_acknowledged_mail(daemon):
    acked: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def sender(n: int):
        try:
            with Client(daemon.dir) as c:
                i = 0
                while not stop.is_set():
                    a = c.call(
                        {
                            "verb": "mail/send",
                            "to": "bob",
                            "body": f"sender {n} message {i}\n" * 50,
                            "key": f"s{n}-{i}",
                        }
                    )
                    acked.append(a["mail_id"])
                    i += 1
        except (WireError, OSError):
            pass  # the daemon died under us: expected
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        daemon.wait_until(lambda: len(acked) >= 60, timeout=30, what="60 acknowledged sends")
        daemon.kill9()  # while the senders are still sending
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    acked_now = list(acked)
    daemon.start()
    listed = daemon.ok("mail", "list", "--handle", "bob", "--state", "all", "--limit", "500")
    ids = [m["mail_id"] for m in listed["messages"]]
    assert len(ids) == len(set(ids))  # nothing duplicated
    assert listed["total"] == len(ids)
    missing = set(acked_now) - set(ids)
    assert not missing, sorted(missing)
    inbox = os.path.join(daemon.dir, "mail", "bob", "inbox")
    names = sorted(os.listdir(inbox))
    assert names == sorted(i + ".md" for i in ids)  # what is listed is what is there
    for name in names:  # no half message
        with open(os.path.join(inbox, name), "rb") as f:
            data = f.read()
        end = data.index(b"\n---\n\n")
        meta = yaml.safe_load(data[4:end].decode())
        assert meta["id"] + ".md" == name
        body = data[end + 6 :]
        assert body.endswith(b"\n") and body.count(b"\n") == 50
    assert os.listdir(os.path.join(daemon.dir, "mail", "bob", "tmp")) == []
    events = parsed_log(daemon, torn_allowed=1)
    check_log_shape(events)
    sent = [e["mail_id"] for e in events if e["kind"] == "mail/sent"]
    assert len(sent) == len(set(sent))
    assert set(acked_now) <= set(sent)
    assert set(sent) == set(ids)  # every message on disk is in the log (recovered or not)
    restarted = [e for e in events if e["kind"] == "daemon/started"]
    assert len(restarted) == 2 and restarted[-1].get("recovered") is True
    # Keys still deduplicate after the crash.
    again = daemon.ok("mail", "send", "bob", "-m", "sender 0 message 0\n" * 50, "--key", "s0-0")
    assert again["duplicate"] is True and again["mail_id"] in ids


def test_kill9_then_reads_and_sends_continue(daemon):
    with Client(daemon.dir) as c:
        ids = [
            c.call({"verb": "mail/send", "to": "bob", "body": str(i)})["mail_id"] for i in range(5)
        ]
    daemon.ok("mail", "read", ids[0], "--handle", "bob")
    daemon.kill9()
    daemon.start()
    a = daemon.ok("mail", "list", "--handle", "bob", "--state", "all")
    assert [(m["mail_id"], m["state"]) for m in a["messages"]] == (
        [(ids[0], "read")] + [(i, "unread") for i in ids[1:]]
    )
    new = daemon.ok("mail", "send", "bob", "-m", "new")
    assert new["mail_id"] > ids[-1]
    assert daemon.ok("mail", "read", "--handle", "bob")["mail_id"] == ids[1]


def test_kill9_before_the_index_commits_loses_no_mail_and_no_key(daemon):
    # The index commits up to INDEX_COMMIT_S after a batch (committer.py): a kill -9
    # straight after the acks finds it behind the files, and the restart rebuilds it.
    with Client(daemon.dir) as c:
        sent = [
            c.call({"verb": "mail/send", "to": "bob", "body": str(i), "key": f"k{i}"})
            for i in range(20)
        ]
    daemon.kill9()
    daemon.start()
    listed = daemon.ok("mail", "list", "--handle", "bob", "--state", "all", "--limit", "50")
    assert [m["mail_id"] for m in listed["messages"]] == [s["mail_id"] for s in sent]
    assert listed["total"] == 20
    with Client(daemon.dir) as c:
        again = c.call({"verb": "mail/send", "to": "bob", "body": "7", "key": "k7"})
    assert again["duplicate"] is True and again["mail_id"] == sent[7]["mail_id"]


def test_staged_leftovers_cleaned_at_start(daemon):
    daemon.ok("mail", "send", "bob", "-m", "x")
    daemon.kill9()
    tmp = os.path.join(daemon.dir, "mail", "bob", "tmp")
    with open(os.path.join(tmp, "20200101T000000.000Z-0001.md"), "wb") as f:
        f.write(b'---\nid: "half')  # a half-staged message from the crash
    daemon.start()
    assert os.listdir(tmp) == []
    a = daemon.ok("mail", "list", "--handle", "bob", "--state", "all")
    assert a["total"] == 1


# ---------------------------------------------------------------- stopping


def test_bench_down_stops_it(daemon):
    pid = daemon.proc.pid
    r = daemon.bench("down")
    assert r.rc == 0, r
    assert daemon.dir in r.out
    assert daemon.proc.wait(timeout=30) == 0
    assert not os.path.exists(os.path.join(daemon.dir, "benchd.sock"))
    events = parsed_log(daemon)
    assert events[-1]["kind"] == "daemon/stopped" and events[-1]["pid"] == pid
    r = daemon.bench("status")
    assert r.rc == 3


def test_sigterm_stops_cleanly(daemon):
    daemon.ok("mail", "send", "bob", "-m", "x")
    assert daemon.stop() == 0
    assert not os.path.exists(os.path.join(daemon.dir, "benchd.sock"))
    assert parsed_log(daemon)[-1]["kind"] == "daemon/stopped"
    daemon.start()
    started = [e for e in parsed_log(daemon) if e["kind"] == "daemon/started"]
    assert started[-1].get("recovered") is False


# ---------------------------------------------------------------- disk faults


def arm(daemon, point: str, errno: str = "ENOSPC", count: int = 1) -> None:
    with Client(daemon.dir) as c:
        a = c.call({"verb": "debug/fault", "point": point, "errno": errno, "count": count})
    assert a["ok"] is True


@pytest.mark.parametrize(
    "point, errno, code",
    [
        ("deliver", "ENOSPC", "disk-full"),
        ("deliver", "EIO", "io-error"),
        ("eventlog", "ENOSPC", "disk-full"),
        ("eventlog", "EIO", "io-error"),
        ("journal", "ENOSPC", "disk-full"),
        ("journal", "EIO", "io-error"),
    ],
)
def test_a_failed_write_is_refused_and_leaves_nothing(daemon, point, errno, code):
    first = daemon.ok("mail", "send", "bob", "-m", "before")
    lines_before = log_lines(daemon)
    arm(daemon, point, errno)
    r = daemon.bench("mail", "send", "bob", "-m", "during", "--key", "k-fault", "--json")
    assert r.rc == 1, r
    assert_refused(r, code)
    inbox = os.path.join(daemon.dir, "mail", "bob", "inbox")
    assert os.listdir(inbox) == [first["mail_id"] + ".md"]
    assert os.listdir(os.path.join(daemon.dir, "mail", "bob", "tmp")) == []
    assert log_lines(daemon) == lines_before  # no event for what was not delivered
    # The fault was one-shot: the same key now delivers (it was never used).
    after = daemon.ok("mail", "send", "bob", "-m", "after", "--key", "k-fault")
    assert after["duplicate"] is False
    listed = daemon.ok("mail", "list", "--handle", "bob")
    assert [m["mail_id"] for m in listed["messages"]] == [first["mail_id"], after["mail_id"]]
    check_log_shape(parsed_log(daemon))
    daemon.restart()  # and a restart finds everything consistent
    listed = daemon.ok("mail", "list", "--handle", "bob")
    assert [m["mail_id"] for m in listed["messages"]] == [first["mail_id"], after["mail_id"]]


def test_a_failed_retire_keeps_the_message_unread(daemon):
    a = daemon.ok("mail", "send", "bob", "-m", "x")
    arm(daemon, "eventlog", "EIO")
    r = daemon.bench("mail", "read", a["mail_id"], "--handle", "bob", "--json")
    assert_refused(r, "io-error", rc=1)
    assert os.path.exists(a["path"])  # the move was taken back
    got = daemon.ok("mail", "read", a["mail_id"], "--handle", "bob")
    assert got["retired"] is True
    assert not os.path.exists(a["path"])
