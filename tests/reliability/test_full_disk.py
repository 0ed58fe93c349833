"""A full disk degrades the daemon, it does not stop it.

On a real 2 MB tmpfs filled by sends: the daemon starts again after a kill -9 and after
a clean stop; listing, reading, searching, threads, status and events work; sends
answer disk-full; `bench status` says the disk is full; the journal's preallocation
left the reserve alone; no traceback anywhere.
"""

from __future__ import annotations

import os

from bench_wire.errors import WireError
from tests.reliability.test_index_failures import fill_disk, small_fs  # noqa: F401 - a fixture
from tests.support.daemon import Benchd


def fill_with_mail(d: Benchd, tag: str) -> dict[str, str]:
    """Send until the disk refuses big and then small messages: {key: mail_id} of every
    answered send."""
    sent: dict[str, str] = {}
    with d.connect() as c:
        for size in (8000, 100):
            for i in range(2000):
                key = f"{tag}-{size}-{i}"
                body = "quokka " + "x" * size
                try:
                    a = c.call({"verb": "mail/send", "to": "bob", "body": body, "key": key})
                except WireError as err:
                    assert err.code == "disk-full", err
                    break
                sent[key] = a["mail_id"]
            else:
                raise AssertionError(f"2,000 sends of {size} bytes fitted on a 2 MB disk")
    return sent


def usable(d: Benchd, sent: dict[str, str]) -> None:
    sent.update(fill_with_mail(d, f"more{len(sent)}"))  # whatever room the start left
    listed = d.ok("mail", "list", "--handle", "bob", "--state", "all", "--limit", "500")
    assert {m["mail_id"] for m in listed["messages"]} == set(sent.values())
    first = min(sent.values())
    assert d.ok("mail", "read", first, "--handle", "bob")["mail_id"] == first
    # The newest messages may be held by the index without a commit (the disk refuses
    # it): what `mail read` returns, `mail thread` finds all the same.
    newest = max(sent.values())
    assert d.ok("mail", "read", newest, "--handle", "bob")["mail_id"] == newest
    assert [x["mail_id"] for x in d.ok("mail", "thread", newest)["messages"]] == [newest]

    # Search reads what the index committed: on a full disk the index file cannot take
    # the new text, and after its retries it is rebuilt in memory (index/failed).
    d.wait_until(
        lambda: d.call({"verb": "mail/search", "query": "quokka", "handle": "bob"}).get("hits"),
        60,
        "search hits",
    )
    thread = d.call({"verb": "mail/thread", "mail_id": first})
    assert thread["ok"] and [x["mail_id"] for x in thread["messages"]] == [first], thread
    assert d.events()  # the event log reads
    for i in range(50):  # room a start or the index gave back is taken again first
        r = d.bench("mail", "send", "bob", "-m", "one more", "--key", f"one-more-{i}")
        assert "Traceback" not in r.err, r
        if r.rc != 0:
            break
        sent[f"one-more-{i}"] = r.out.split()[1]
    assert r.rc != 0 and "disk-full" in r.err, r
    status = d.bench("status")
    assert status.rc == 0 and "disk      FULL" in status.out, status
    assert d.ok("status")["disk"]["full"] is True


def no_traceback(bench_dir: str) -> None:
    for name in ("benchd.log", "benchd.out"):
        path = os.path.join(bench_dir, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text = f.read()
                assert "Traceback" not in text, text[-3000:]


def test_the_daemon_starts_and_serves_reads_on_a_full_disk(small_fs):  # noqa: F811
    d = Benchd(small_fs, [])
    d.start()
    low = d.wait_event("disk/low")  # a 2 MB disk is below the reserve: no preallocation
    assert low["reserve"] == 64 << 20
    assert os.path.getsize(os.path.join(small_fs, "journal-0")) < 1 << 20
    sent = fill_with_mail(d, "first")
    assert sent, "not one send fitted"
    d.kill9()
    r = d.bench("up")
    assert r.rc == 0, r
    usable(d, sent)
    r = d.bench("down")
    assert r.rc == 0, r
    r = d.bench("up")
    assert r.rc == 0, r
    usable(d, sent)
    assert d.bench("down").rc == 0
    no_traceback(small_fs)


def test_a_start_that_cannot_happen_says_why_in_one_line(small_fs):  # noqa: F811
    d = Benchd(small_fs, [])
    d.start()
    big = "y" * 200_000
    ids = []
    for i in range(2):
        a = d.call({"verb": "mail/send", "to": "bob", "body": big, "key": f"big{i}"})
        ids.append(a["mail_id"])
    d.kill9()
    for mail_id in ids:  # lost with the page cache: the replay must write them back
        os.unlink(os.path.join(small_fs, "mail", "bob", "inbox", mail_id + ".md"))
    filler = os.path.join(small_fs, "filler")
    fill_disk(filler, 0)  # more than the room held for a start is needed
    r = d.bench("up")
    assert r.rc != 0 and "disk-full" in r.err, r
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r
    no_traceback(small_fs)
    os.unlink(filler)
    r = d.bench("up")
    assert r.rc == 0, r
    listed = d.ok("mail", "list", "--handle", "bob")
    assert sorted(m["mail_id"] for m in listed["messages"]) == sorted(ids)
    assert d.bench("down").rc == 0
    no_traceback(small_fs)
