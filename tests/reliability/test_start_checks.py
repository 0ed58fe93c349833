"""Every clean start sees the files as they are: hand edits made while the daemon ran,
a seal forged for a stale index, and which mailboxes exist.

Real daemon, real files: the edits are made with os calls while benchd runs, then it
is stopped cleanly (SIGTERM, as `bench down` does) and started again. What is asserted
is what a user sees: the listing, search, read by id, and a keyed resend.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest

from benchd.core import frontmatter
from benchd.store.recovery import file_sum
from tests.reliability.common import scan_events, scan_mail
from tests.reliability.test_index_failures import box, no_internal_errors, send


def dropped_in(d, mail_id: str, key: str, body: bytes, handle: str = "bob") -> None:
    meta = {
        "id": mail_id,
        "from": "operator",
        "to": handle,
        "subject": "by hand",
        "date": "2026-11-30T04:56:11.123Z",
        "key": key,
        "reply-to": [],
        "in-reply-to": None,
    }
    with open(box(d, "inbox", mail_id, handle), "wb") as f:
        f.write(frontmatter.render(meta, body))


def states(d, handle: str = "bob") -> dict[str, str]:
    listed = d.call({"verb": "mail/list", "handle": handle, "state": "all", "limit": 500})
    return {m["mail_id"]: m["state"] for m in listed["messages"]}


def test_edits_made_while_running_are_seen_by_the_next_clean_start(make_daemon):
    d = make_daemon()
    ids = sorted(send(d, 4, "edit").values())
    # While the daemon runs: one file deleted, one moved to read/, one dropped in.
    os.unlink(box(d, "inbox", ids[0]))
    os.rename(box(d, "inbox", ids[1]), box(d, "read", ids[1]))
    dropped = "20261130T045611.123Z-9999"
    dropped_in(d, dropped, "by-hand-1", b"zanzibar quokka\n")
    for _ in range(2):  # and it stays right across further clean restarts
        d.restart()
        assert states(d) == {ids[1]: "read", ids[2]: "unread", ids[3]: "unread", dropped: "unread"}
        hits = d.call({"verb": "mail/search", "query": "quokka", "handle": "bob"})
        assert [h["mail_id"] for h in hits["hits"]] == [dropped], hits
        r = d.bench("mail", "read", ids[0], "--handle", "bob")
        assert r.rc == 1 and "no-such-message" in r.err, r
    assert d.ok("mail", "read", dropped, "--handle", "bob")["body"] == "zanzibar quokka\n"
    again = d.call({"verb": "mail/send", "to": "bob", "body": "x", "key": "by-hand-1"})
    assert again["ok"] is False and again["error"]["code"] == "key-conflict", again
    no_internal_errors(d)


def forge_seal(d, stale_index: str) -> None:
    """Put a stale index back with a seal that vouches for it in every way a seal can:
    its crc, the event log's end, and each mailbox directory's mtime as it is now."""
    path = os.path.join(d.dir, "index.sqlite")
    shutil.copy(stale_index, path)
    last = scan_events(d.dir).events[-1]["seq"]
    db = sqlite3.connect(path)
    db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES ('last_seq', ?)", (str(last),))
    db.commit()
    db.close()
    mail = os.path.join(d.dir, "mail")
    dirs = {
        h: [os.stat(os.path.join(mail, h, sub)).st_mtime_ns for sub in ("inbox", "read")]
        for h in os.listdir(mail)
    }
    with open(os.path.join(d.dir, "index.seal"), "w") as f:
        json.dump({"sum": file_sum(path), "dirs": dirs}, f)


def test_a_seal_forged_for_a_stale_index_hides_no_mail(make_daemon, tmp_path):
    d = make_daemon()
    first = send(d, 1, "old")
    d.stop()
    stale = tmp_path / "stale"
    stale.mkdir()
    shutil.copy(os.path.join(d.dir, "index.sqlite"), stale / "index.sqlite")  # cleanly stopped
    d.start()
    later = send(d, 1, "new")
    d.stop()
    forge_seal(d, str(stale / "index.sqlite"))
    d.start()
    both = sorted([*first.values(), *later.values()])
    assert sorted(states(d)) == both
    assert d.call({"verb": "mail/list", "handle": "bob", "state": "unread"})["total"] == 2
    (mail_id,) = later.values()
    assert d.ok("mail", "read", mail_id, "--handle", "bob")["body"] == "new 0\n"
    again = d.call({"verb": "mail/send", "to": "bob", "body": "new 0\n", "key": "new-0"})
    assert again["duplicate"] is True and again["mail_id"] == mail_id, again
    assert len(scan_mail(d.dir).messages) == 2  # the resend wrote no second file
    d.restart()  # and the stop after seals the index as it now is
    assert sorted(states(d)) == both
    no_internal_errors(d)


def test_new_mailbox_is_right_across_a_restart(make_daemon):
    d = make_daemon()
    assert d.ok("mail", "send", "bob", "-m", "first")["new_mailbox"] is True
    d.restart()
    assert d.ok("mail", "send", "bob", "-m", "again")["new_mailbox"] is False
    assert d.ok("mail", "send", "newcomer", "-m", "hi")["new_mailbox"] is True
    no_internal_errors(d)


def edit_index(d, sql: list[str]) -> None:
    """What a same-user program can do to a stopped daemon's index: run SQL on it, then
    write the seal again for the file as it now is, as the daemon would have."""
    path = os.path.join(d.dir, "index.sqlite")
    db = sqlite3.connect(path)
    for statement in sql:
        db.execute(statement)
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(os.path.join(d.dir, "index.seal"), "w") as f:
        json.dump({"sum": file_sum(path)}, f)


@pytest.mark.parametrize("counts", ["left", "kept-in-step"])
def test_rows_removed_from_a_sealed_index_are_found_again(make_daemon, counts):
    d = make_daemon()
    sent = send(d, 2, "edit")
    d.stop()
    gone = sent["edit-1"]
    sql = [f"DELETE FROM messages WHERE id='{gone}'", f"DELETE FROM mail_links WHERE id='{gone}'"]
    if counts == "kept-in-step":  # the counts edited too: only the files can tell
        sql.append("UPDATE counts SET n=n-1 WHERE handle='bob' AND state=0")
    edit_index(d, sql)
    d.start()
    listed = d.call({"verb": "mail/list", "handle": "bob", "state": "unread"})
    assert listed["total"] == 2 and len(listed["messages"]) == 2, listed
    assert d.ok("mail", "read", gone, "--handle", "bob")["body"] == "edit 1\n"
    again = d.call({"verb": "mail/send", "to": "bob", "body": "edit 1\n", "key": "edit-1"})
    assert again["duplicate"] is True and again["mail_id"] == gone, again
    assert len(scan_mail(d.dir).messages) == 2  # the resend wrote no second file
    rebuilt = [e for e in scan_events(d.dir).events if e["kind"] == "index/rebuilt"]
    if counts == "left":  # rows and counts disagree: the whole file is set aside
        assert rebuilt and "edited after its clean stop" in rebuilt[-1]["reason"], rebuilt
    d.restart()
    assert sorted(states(d)) == sorted(sent.values())
    no_internal_errors(d)
