"""The event log's bound (--event-log-bytes): at the bound events.jsonl is rotated to
events.1.jsonl (the one before dropped), a log/rotated event begins the new file, and
everything that reads the log goes on across the rotation: `bench events --since`, the
delivery states after a kill -9 and after the index is lost and rebuilt."""

import os
import subprocess

from tests.conftest import BENCH, Result, assert_refused


def _send(d, n: int, to: str = "bob") -> list[str]:
    ids = []
    with d.connect() as c:
        for i in range(n):
            c.send({"verb": "mail/send", "to": to, "body": f"message {i} " + "x" * 200})
            a = c.recv()
            assert a.get("ok"), a
            ids.append(a["mail_id"])
    return ids


def _seqs(d, since: int = 0) -> list[int]:
    return [e["seq"] for e in d.events(since)]


def test_the_log_rotates_at_its_bound_and_what_reads_it_goes_on(make_daemon):
    bound = 64 * 1024
    d = make_daemon("--event-log-bytes", str(bound))
    log = os.path.join(d.dir, "events.jsonl")
    first = _send(d, 700)  # about 160 KiB of mail/sent lines: two rotations
    rot = d.wait_event("log/rotated", lambda e: e["dropped"] > 0)
    assert rot["bound"] == bound and rot["kept_from"] == rot["dropped"] + 1
    assert os.path.exists(os.path.join(d.dir, "events.1.jsonl"))
    # The log holds at most about twice its bound (and a batch).
    held = os.path.getsize(log) + os.path.getsize(os.path.join(d.dir, "events.1.jsonl"))
    assert held < 2 * bound + 32 * 1024, held
    # Readers see one run of seqs across the two files, from where the kept history begins.
    seqs = _seqs(d)
    assert seqs == list(range(seqs[0], seqs[-1] + 1)) and seqs[0] > 1
    last = d.events()[-1]["seq"]
    assert _seqs(d, last - 3) == [last - 2, last - 1, last]
    # The delivery states go on: mail read now, mail from before the rotations.
    d.ok("mail", "read", first[-1], "--handle", "bob")
    assert d.ok("mail", "status", first[-1])["state"] == "read"
    assert d.ok("mail", "status", first[0])["state"] == "not-woken"
    # A kill -9 and a start: the states, the seqs and the log are as they were.
    d.kill9()
    d.start()
    assert d.ok("mail", "status", first[-1])["state"] == "read"
    more = _send(d, 5)
    seqs = _seqs(d)
    assert seqs == list(range(seqs[0], seqs[-1] + 1)) and seqs[-1] > last
    # The index lost: rebuilt from the files, the states from the kept log.
    d.stop()
    os.unlink(os.path.join(d.dir, "index.sqlite"))
    d.start()
    assert d.ok("mail", "status", first[-1])["state"] == "read"
    assert d.ok("mail", "status", more[-1])["state"] == "not-woken"
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 704  # one was read
    # What a rebuilt index cannot have: the states of mail whose events were dropped
    # with the oldest file (the mail itself is there, listed above). It is not
    # announced again as recovered mail either.
    r = d.bench("mail", "status", first[0], "--json")
    assert_refused(r, "no-such-message")
    assert not [e for e in d.events(kind="mail/sent") if e.get("recovered")]


def test_the_bound_has_a_floor(bench_dir):
    r = Result(
        subprocess.run(
            [BENCH, "up", "--event-log-bytes", "1000", "--json"],
            env={**os.environ, "BENCH_DIR": bench_dir},
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    assert r.rc == 2 and "--event-log-bytes must be at least 65,536" in (r.out + r.err), r
