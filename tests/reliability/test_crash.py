"""kill -9 of the daemon under load, for mail and for the job outbox.

Short versions for the default suite; `python -m tools.reliability.soak --seconds N` runs
the same mail crash loop for as long as asked.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

from tests.reliability.common import concurrent_calls, scan_events, scan_mail
from tests.reliability.jobs import (
    arm,
    barrier,
    check_replies,
    posted_keys,
    spawn_job,
)
from tests.support.wait import wait_for
from tools.reliability.crashloop import CrashLoop

pytestmark = pytest.mark.slow  # crash loops: kill -9 under load, again and again

SEED = 20261130


# ------------------------------------------------------------------ mail


def test_kill9_under_concurrent_senders_loses_and_duplicates_nothing(bench_dir, tmp_path):
    loop = CrashLoop(senders=4, seed=SEED, bench_dir=bench_dir, work_dir=str(tmp_path))
    try:
        f = loop.run(rounds=3, min_new=15, max_delay=0.3, tail_acks=15)
    finally:
        loop.close()
    print("\n" + f.report())
    assert f.ok, f.report()
    assert f.rounds == 3
    assert f.acked >= 3 * 15 + 15
    assert f.found == f.acked and f.lost == 0 and f.duplicates == 0 and f.phantom == 0
    assert f.corrupt == 0 and f.staged_left == 0 and f.stray_files == 0
    assert f.torn_lines <= f.rounds and f.seq_errors == 0
    assert f.resent == f.acked and f.resend_bad == 0 and f.resend_wrote == 0


# ------------------------------------------------------------------ outbox


def _jobs(d, n_jobs: int, handles: list[str], tag: str) -> dict[str, dict]:
    jobs = {}
    for n in range(n_jobs):
        name, key, content = f"{tag}{n}", f"{tag}-key-{n}", f"result of {tag} {n}"
        a = spawn_job(d, name, key, handles, content)
        jobs[name] = {"key": key, "session": a["session"], "content": content}
    for name in jobs:
        st = d.wait_event("job/settled", lambda e, name=name: e["handle"] == name, 60)
        assert st["outcome"] == "completed" and st["replies"] == len(handles), st
    return jobs


def test_kill9_between_settlement_and_drain_replies_exactly_once(make_daemon):
    # Every post is refused while this daemon lives, so the replies stay pending.
    d = make_daemon("--retry-base", "1.5")
    arm(d, "post", "EIO", 1_000_000)
    handles = [f"p{i}" for i in range(10)] + ["operator"]
    jobs = _jobs(d, 3, handles, "settle")
    total = len(jobs) * len(handles)
    wait_for(
        lambda: len({e["key"] for e in d.events(kind="outbox/retry")}) >= total,
        60,
        f"{total} refused first posts",
    )
    assert posted_keys(d, "outbox:settle-") == {}
    assert all(
        not [m for m in d.events(kind="mail/sent") if m["to"] == h]
        for h in handles
        if h != "operator"
    )
    since = d.last_seq()
    d.kill9()
    d.start()
    wait_for(
        lambda: len(posted_keys(d, "outbox:settle-", since)) == total,
        60,
        f"{total} replies posted after the restart",
    )
    barrier(d, "a")
    check_replies(d, jobs, handles)
    # A second kill -9 after delivery posts nothing again.
    since = d.last_seq()
    d.kill9()
    d.start()
    barrier(d, "b")
    assert posted_keys(d, "outbox:settle-", since) == {}
    check_replies(d, jobs, handles)
    settles = [e for e in d.events(kind="job/settled") if e["handle"].startswith("settle")]
    assert len(settles) == len(jobs), settles


def _follow_posted_then_kill(d, since: int, threshold: int) -> int:
    """Follow outbox/posted live; SIGKILL the daemon once `threshold` have been seen."""
    seen = 0
    with d.connect() as c:
        c.send({"verb": "events", "follow": True, "kind": "outbox/posted", "since": since})
        while seen < threshold:
            frame = c.recv()
            assert frame.get("ok") is True, frame
            if frame["type"] == "end":
                break
            seen += 1
        d.kill9()
    return seen


def test_kill9_during_a_drain_replies_exactly_once(make_daemon):
    rng = random.Random(SEED)
    # 60 reply-to handles per job (the limit's default is 16): pages of replies to drain.
    d = make_daemon("--retry-base", "0.2", "--reply-to-max", "60")
    arm(d, "post", "EIO", 1_000_000)  # hold every reply back until the outbox is full
    handles = [f"r{i:02d}" for i in range(60)]
    jobs = _jobs(d, 5, handles, "drain")
    total = len(jobs) * len(handles)
    wait_for(
        lambda: len({e["key"] for e in d.events(kind="outbox/retry")}) >= total,
        90,
        f"{total} refused first posts",
    )
    prefix = "outbox:drain-"
    kills = 0
    since = d.last_seq()
    # The next half of the tries are refused once more: the drain delivers in two waves,
    # the second a backoff (0.4 s) after the first, page after page; the first kill
    # lands between them. (A settlement's replies and their receipts are one commit, so
    # a page is delivered as fast as the disk flushes: without the second wave every
    # reply is delivered before a follower can react.)
    arm(d, "post", "EIO", total // 2)
    for _ in range(2):
        remaining = total - len(posted_keys_from_log(d.dir, prefix))
        if remaining < 2:
            break  # a fast restart drained (nearly) all: no mid-drain moment left to kill
        threshold = min(rng.randint(5, 80), remaining - 1)
        _follow_posted_then_kill(d, since, threshold)
        kills += 1
        done = len(posted_keys_from_log(d.dir, prefix))
        assert done > 0, f"the kill was meant to land after a page ({done}/{total})"
        # The first kill lands mid-drain; the restart's drain (its faults cleared) may
        # deliver the rest before the second.
        assert kills > 1 or done < total, f"the kill was meant to land mid-drain ({done})"
        # Counted from the end of the log as the kill left it: the restart's own drain
        # (it begins before the daemon answers) is followed too.
        since = scan_events(d.dir).events[-1]["seq"]
        d.start()
    wait_for(
        lambda: len(posted_keys_from_log(d.dir, prefix)) == total,
        120,
        f"all {total} replies posted",
    )
    barrier(d, "drained")
    check_replies(d, jobs, handles)
    # A reply posted again after a crash (delivered, receipt not yet written) is the
    # mailroom's duplicate: the same message id, never a second message.
    for key, ids in posted_keys_from_log(d.dir, prefix).items():
        assert len(set(ids)) == 1, (key, ids)
    log = scan_events(d.dir)
    assert len(log.torn) <= kills and log.seq_errors == []


def posted_keys_from_log(bench_dir: str, prefix: str) -> dict[str, list[str]]:
    """Like posted_keys, from the file (works while the daemon is down)."""
    out: dict[str, list[str]] = {}
    for e in scan_events(bench_dir).of_kind("outbox/posted"):
        if e["key"].startswith(prefix):
            out.setdefault(e["key"], []).append(e["mail_id"])
    return out


# ------------------------------------------------------------------ recovery by itself


def _send_some(d, n: int, tag: str) -> dict[str, dict]:
    sent = {}
    with d.connect() as c:
        for i in range(n):
            key = f"{tag}-{i}"
            to = ("alice", "bob", "operator")[i % 3]
            a = c.call({"verb": "mail/send", "to": to, "body": f"{tag} body {i}\n", "key": key})
            sent[key] = {"mail_id": a["mail_id"], "to": to, "body": f"{tag} body {i}\n"}
    return sent


def _assert_all_there_and_idempotent(d, sent: dict[str, dict]) -> None:
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == []
    by_key = {m["meta"]["key"]: m for m in scan.messages}
    for key, s in sent.items():
        assert by_key[key]["meta"]["id"] == s["mail_id"], key
    for h in ("alice", "bob", "operator"):
        a = d.call({"verb": "mail/list", "handle": h, "state": "all", "limit": 1})
        assert a["total"] == scan.count(h), (h, a)
    before = len(scan.messages)
    with d.connect() as c:
        for key, s in sent.items():
            a = c.call({"verb": "mail/send", "to": s["to"], "body": s["body"], "key": key})
            assert a["duplicate"] is True and a["mail_id"] == s["mail_id"], a
    assert len(scan_mail(d.dir).messages) == before


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_a_lost_or_damaged_index_is_rebuilt_from_the_files(make_daemon, damage):
    d = make_daemon()
    sent = _send_some(d, 30, "idx")
    d.ok("mail", "read", sent["idx-1"]["mail_id"], "--handle", "bob")
    d.kill9()
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(d.dir, "index.sqlite" + suffix)
        if os.path.exists(path):
            os.unlink(path)
    if damage == "garbage":
        with open(os.path.join(d.dir, "index.sqlite"), "wb") as f:
            f.write(b"this is not a database" * 100)
    d.start()
    _assert_all_there_and_idempotent(d, sent)
    states = {m["meta"]["key"]: m["state"] for m in scan_mail(d.dir).messages}
    assert states["idx-1"] == "read" and states["idx-0"] == "inbox"
    retired = d.call({"verb": "mail/list", "handle": "bob", "state": "read"})
    assert [x["mail_id"] for x in retired["messages"]] == [sent["idx-1"]["mail_id"]]
    more = _send_some(d, 3, "after")  # ids keep increasing past the recovered ones
    assert min(s["mail_id"] for s in more.values()) > max(s["mail_id"] for s in sent.values())


@pytest.mark.parametrize("journal", ["replayed", "checkpointed"])
def test_a_torn_log_tail_and_staged_leftovers_are_recovered_at_start(make_daemon, journal):
    """A fragment past the journal's last committed batch belongs to a batch that was
    never answered: the replay cuts it off. With nothing to replay (the journal was
    checkpointed), the log keeps it as a line of its own that readers skip."""
    d = make_daemon()
    sent = _send_some(d, 10, "torn")
    last = d.last_seq()
    d.kill9()
    if journal == "checkpointed":
        for name in ("journal-0", "journal-1"):
            os.unlink(os.path.join(d.dir, name))  # the page cache still holds the files
    # What a crash in the middle of an append and of a delivery leaves behind.
    with open(os.path.join(d.dir, "events.jsonl"), "ab") as f:
        f.write(b'{"seq":%d,"ts":1796000000000,"kind":"mail/sent","mail_id":"2026' % (last + 1))
    staged = os.path.join(d.dir, "mail", "bob", "tmp", "20261130T000000.000Z-0001.md")
    with open(staged, "wb") as f:
        f.write(b'---\nid: "20261130T000000.000Z-0001"\nfrom: "operator"\nto: "b')
    d.start()
    assert not os.path.exists(staged)
    more = _send_some(d, 5, "after-torn")
    log = scan_events(d.dir)
    torn = 1 if journal == "checkpointed" else 0
    assert len(log.torn) == torn and log.seq_errors == [], (log.torn, log.seq_errors)
    seqs = [e["seq"] for e in log.events]
    assert seqs == sorted(set(seqs)) and seqs[-1] > last
    started = [e for e in log.events if e["kind"] == "daemon/started"]
    # A seq the cut fragment held is never handed out again (a reader may have seen it).
    first = last + 2 if journal == "replayed" else last + 1
    assert started[-1]["seq"] == first and started[-1]["recovered"] is True
    # Readers skip the torn line, from the start and from a seq around it.
    assert [e["seq"] for e in d.events()] == seqs
    assert [e["seq"] for e in d.events(since=last)] == [s for s in seqs if s > last]
    assert [e["seq"] for e in d.events(since=last - 3)] == [s for s in seqs if s > last - 3]
    _assert_all_there_and_idempotent(d, {**sent, **more})


def test_writes_lost_with_the_page_cache_are_replayed_from_the_journal(make_daemon):
    """kill -9 keeps the page cache, so a plain kill never tests the journal: here, after
    the kill, every write the journal covers is undone as a power cut could undo it (the
    message files deleted, a new mailbox's directory gone, the event log cut back to the
    first journaled batch). The start replays the journal: every acknowledged message is
    back exactly once, read where it was read, each event logged exactly once."""
    from benchd.store import journal

    d = make_daemon()
    d.ok("mail", "send", "bob", "-m", "before")
    reqs = [
        {"verb": "mail/send", "to": to, "body": f"body {i}", "key": f"k{i}"}
        for i, to in enumerate(["bob"] * 24 + ["carol"] * 6)
    ]
    acked = {r["key"]: r for r in concurrent_calls(d.dir, reqs) if r.get("ok")}
    assert len(acked) == len(reqs)
    retired = [acked[f"k{i}"]["mail_id"] for i in (1, 2, 3)]
    for mail_id in retired:
        assert d.ok("mail", "read", mail_id, "--handle", "bob")["retired"] is True
    before = {e["seq"]: e for e in d.events()}
    d.kill9()

    records = []
    for name in journal.SEGMENTS:
        with open(os.path.join(d.dir, name), "rb") as f:
            records += [
                journal.decode_entries(r.payload, d.dir) for r in journal.read_segment(f.read())[0]
            ]
    writes = [e for r in records for e in r if type(e) is journal.Write]
    first_offset = min(e.offset for r in records for e in r if type(e) is journal.Append)
    assert len(writes) == len(reqs) + 1  # and "before"
    for w in writes:
        for p in (w.path, w.alt):
            if os.path.exists(p):
                os.unlink(p)
    shutil.rmtree(os.path.join(d.dir, "mail", "carol"))
    os.truncate(os.path.join(d.dir, "events.jsonl"), first_offset)

    d.start()
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == []
    by_key = scan.by_key()
    for key, a in acked.items():
        [msg] = by_key[("operator", key)]  # exactly once
        assert msg["meta"]["id"] == a["mail_id"] and msg["body"] == f"body {key[1:]}".encode()
        assert msg["state"] == ("read" if a["mail_id"] in retired else "inbox"), msg
    log = scan_events(d.dir)
    assert log.torn == [] and log.seq_errors == []
    after = {e["seq"]: e for e in log.events}
    assert all(after[s] == e for s, e in before.items())  # the same events, the same seqs
    sent = [e["mail_id"] for e in log.of_kind("mail/sent")]
    assert sorted(a["mail_id"] for a in acked.values()) == sorted(
        x for x in sent if x in {a["mail_id"] for a in acked.values()}
    )
    assert len(sent) == len(set(sent)) == len(acked) + 1
    assert sorted(e["mail_id"] for e in log.of_kind("mail/read")) == sorted(retired)
    for key, a in acked.items():  # keys still deduplicate
        again = d.call({"verb": "mail/send", "to": a["to"], "body": f"body {key[1:]}", "key": key})
        assert again["duplicate"] is True and again["mail_id"] == a["mail_id"], again
    listed = d.ok("mail", "list", "--handle", "carol")
    assert listed["total"] == 6
