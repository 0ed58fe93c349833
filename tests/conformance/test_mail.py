"""The mailroom end to end: real benchd, real `bench` CLI, files on disk."""

import os
import re

import pytest
import yaml

from bench_wire.errors import exit_code_for
from tests.support.refusal import assert_refused

DATE_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ID_RE = re.compile(r"\d{8}T\d{6}\.\d{3}Z-\d{4}")
META_KEYS = {"mail_id", "from", "subject", "date", "state", "size", "in_reply_to"}


# ---------------------------------------------------------------- helpers


def box(daemon, handle: str, sub: str = "inbox") -> str:
    return os.path.join(daemon.dir, "mail", handle, sub)


def files(daemon, handle: str, sub: str = "inbox") -> list[str]:
    d = box(daemon, handle, sub)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def tree(root: str) -> dict[str, int]:
    """Every file under root with its size (a snapshot to compare)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.relpath(os.path.join(dirpath, n), root) + "/"] = 0
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


def mail_tree(daemon) -> dict[str, int]:
    return tree(os.path.join(daemon.dir, "mail"))


def split(path: str) -> tuple[dict, bytes]:
    """(front matter parsed by a real YAML parser, body bytes after the blank line)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(b"---\n")
    end = data.index(b"\n---\n\n")
    meta = yaml.safe_load(data[4:end].decode("utf-8"))
    return meta, data[end + len(b"\n---\n\n") :]


def refused(daemon, code: str, *args: str, input: str | None = None) -> dict:
    # --json right after `mail <verb>`, so a `--` later in args still ends the options.
    r = daemon.bench(*args[:2], "--json", *args[2:], input=input)
    assert r.rc == exit_code_for(code), r
    assert "Traceback" not in r.err
    a = r.json
    assert_refused(a, code)
    assert a["error"]["message"]
    return a


def raw_send(daemon, to: str, body: str = "x", **fields) -> dict:
    """One mail/send over the socket; the answer as is (errors not raised)."""
    with daemon.connect() as c:
        c.send({"verb": "mail/send", "to": to, "body": body, **fields})
        return c.recv()


def caps(daemon) -> dict:
    return daemon.ok("status")["caps"]


# ---------------------------------------------------------------- send


BODIES = {
    "plain": "number 100",
    "fences": "---\nid: fake\nfrom: mallory\n---\n\nnot front matter\n---\n",
    "unicode": "héllo ✓ 😀 \u2028 日本語",
    "trailing-newlines": "last line\n\n\n",
    "leading-blank": "\n\n  indented\n",
    "crlf": "a\r\nb\r\n",
    "empty": "",
}


@pytest.mark.parametrize("name", list(BODIES))
def test_send_writes_one_cat_friendly_file(shared, who, name):
    body = BODIES[name]
    a = shared.ok("mail", "send", who, "-s", "hello", "-m", body)
    assert a["ok"] is True and a["to"] == who and a["duplicate"] is False
    assert ID_RE.fullmatch(a["mail_id"])
    names = files(shared, who)
    assert names == [a["mail_id"] + ".md"]
    path = os.path.join(box(shared, who), names[0])
    assert a["path"] == path
    meta, got = split(path)
    assert set(meta) == {"id", "from", "to", "subject", "date", "key"}
    assert meta["id"] == a["mail_id"]
    assert meta["from"] == "operator"
    assert meta["to"] == who
    assert meta["subject"] == "hello"
    assert isinstance(meta["date"], str) and DATE_RE.fullmatch(meta["date"]), meta["date"]
    assert meta["key"] == a["key"] and meta["key"]
    assert got == body.encode("utf-8")
    assert files(shared, who, "tmp") == []
    assert files(shared, who, "read") == []


def test_body_from_stdin_byte_for_byte(shared, who):
    body = "from stdin\x00 with a NUL\n---\n\ttab\n"
    a = shared.ok("mail", "send", who, input=body)
    _, got = split(a["path"])
    assert got == body.encode("utf-8")


def test_reply_to_is_in_the_front_matter(shared, who):
    a = shared.ok("mail", "send", who, "-m", "x", "--reply-to", "bob", "--reply-to", "carol")
    meta, _ = split(a["path"])
    assert meta["reply-to"] == ["bob", "carol"]
    got = shared.ok("mail", "read", a["mail_id"], "--handle", who)
    assert got["reply_to"] == ["bob", "carol"]


@pytest.mark.parametrize(
    "subject",
    [
        "number: 100",
        "a: b: c",
        "\"quoted\" and 'single'",
        "---",
        "--- x ---",
        "# not a comment",
        "[1, 2]",
        "{a: b}",
        "yes",
        "null",
        "2026-01-01",
        "  padded  ",
        "é ✓ 😀",
        "key: [x]",
        "&a *a !tag %x @y `z` |",
    ],
)
def test_awkward_subjects_parse_with_yaml(shared, who, subject):
    a = shared.ok("mail", "send", who, "-s", subject, "-m", "b")
    meta, body = split(a["path"])
    assert meta["subject"] == subject
    assert body == b"b"
    listed = shared.ok("mail", "list", "--handle", who)
    assert [m["subject"] for m in listed["messages"]] == [subject]


@pytest.mark.parametrize(
    "subject",
    ["two\nlines", "cr\rhere", "tab\there", "nul\x01", "esc\x1b[31m", "del\x7f", "c1\x85"],
)
def test_subject_with_control_characters_is_refused(shared, who, subject):
    before = mail_tree(shared)
    a = raw_send(shared, who, subject=subject)
    assert_refused(a, "bad-subject")
    assert mail_tree(shared) == before
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))


def test_subject_with_newline_refused_through_the_cli(shared, who):
    refused(shared, "bad-subject", "mail", "send", who, "-s", "a\nb", "-m", "x")
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))


def test_ids_unique_and_sorted_by_send_order(shared, who):
    sent = []
    with shared.connect() as c:
        for i in range(40):
            sent.append(c.call({"verb": "mail/send", "to": who, "body": str(i)})["mail_id"])
    sent.append(shared.ok("mail", "send", who, "-m", "40")["mail_id"])
    assert len(set(sent)) == len(sent)
    assert sent == sorted(sent)
    listed = shared.ok("mail", "list", "--handle", who, "--limit", "100")
    assert [m["mail_id"] for m in listed["messages"]] == sent
    assert files(shared, who) == [i + ".md" for i in sent]
    bodies = [shared.ok("mail", "read", "--handle", who)["body"] for _ in range(3)]
    assert bodies == ["0", "1", "2"]


def test_mailbox_created_on_first_delivery(shared, who):
    root = os.path.join(shared.dir, "mail", who)
    assert not os.path.exists(root)
    a = shared.ok("mail", "send", who, "-m", "first")
    for sub in ("inbox", "read", "tmp"):
        assert os.path.isdir(os.path.join(root, sub))
    assert a["live"] is False and a["note"] == "no-live-session"
    assert os.path.exists(a["path"])


def test_mail_to_operator(daemon):
    a = daemon.ok("mail", "send", "operator", "-s", "to me", "-m", "hi me")
    assert a["to"] == "operator"
    listed = daemon.ok("mail", "list")  # the operator's own mailbox by default
    assert listed["handle"] == "operator"
    assert [m["mail_id"] for m in listed["messages"]] == [a["mail_id"]]
    got = daemon.ok("mail", "read")
    assert got["body"] == "hi me" and got["to"] == "operator" and got["from"] == "operator"


def test_operator_reads_another_mailbox_with_handle(daemon):
    a = daemon.ok("mail", "send", "dave", "-m", "for dave")
    assert daemon.ok("mail", "list")["total"] == 0  # not in the operator's own box
    got = daemon.ok("mail", "read", a["mail_id"], "--handle", "dave")
    assert got["mail_id"] == a["mail_id"] and got["body"] == "for dave" and got["to"] == "dave"
    refused(daemon, "no-such-message", "mail", "read", a["mail_id"])  # wrong mailbox


# ---------------------------------------------------------------- idempotency


def test_same_key_returns_the_first_id(shared, who):
    key = f"{who}-job-1"  # a sender's keys are its own: unique in the shared daemon
    a = shared.ok("mail", "send", who, "-m", "one", "--key", key)
    assert a["duplicate"] is False and a["key"] == key
    b = shared.ok("mail", "send", who, "-m", "one", "--key", key)
    assert b["mail_id"] == a["mail_id"] and b["duplicate"] is True
    assert b["path"] == a["path"]
    assert files(shared, who) == [a["mail_id"] + ".md"]
    _, body = split(a["path"])
    assert body == b"one"
    meta, _ = split(a["path"])
    assert meta["key"] == key
    c = shared.ok("mail", "send", who, "-m", "one", "--key", f"{who}-job-2")
    assert c["mail_id"] != a["mail_id"] and c["duplicate"] is False
    sent = [e for e in shared.events(kind="mail/sent") if e["to"] == who]
    assert [e["mail_id"] for e in sent] == [a["mail_id"], c["mail_id"]]


@pytest.mark.parametrize(
    "change", [["{who}b", "-m", "one"], ["{who}", "-m", "two"]], ids=["recipient", "body"]
)
def test_a_key_reused_for_another_message_is_refused(shared, who, change):
    key = f"{who}-pay-1"
    a = shared.ok("mail", "send", who, "-m", "one", "--key", key)
    r = shared.bench("mail", "send", *[c.format(who=who) for c in change], "--key", key)
    assert r.rc == 1 and "[key-conflict]" in r.err and "new key" in r.err, r
    assert files(shared, who) == [a["mail_id"] + ".md"]
    assert not os.path.exists(os.path.join(shared.dir, "mail", f"{who}b"))
    # The identical resend is still the first message.
    again = shared.ok("mail", "send", who, "-m", "one", "--key", key)
    assert again["duplicate"] is True and again["mail_id"] == a["mail_id"]
    # A retry that leaves out (or changes) the subject is still the same message.
    retry = shared.ok("mail", "send", who, "-m", "one", "-s", "re", "--key", key)
    assert retry["duplicate"] is True and retry["mail_id"] == a["mail_id"]


def test_a_key_conflict_sent_together_is_refused(shared, who):
    """Sends with one key pipelined on a connection (often one batch): the one that differs
    is refused, the identical one is the first message."""
    with shared.connect() as c:
        c.send({"verb": "mail/send", "id": 1, "to": who, "body": "one", "key": who})
        c.send({"verb": "mail/send", "id": 2, "to": who, "body": "two", "key": who})
        c.send({"verb": "mail/send", "id": 3, "to": who, "body": "one", "key": who})
        got = {a["id"]: a for a in (c.recv(), c.recv(), c.recv())}
    assert got[1]["ok"] is True and got[3]["duplicate"] is True
    assert got[3]["mail_id"] == got[1]["mail_id"]
    assert_refused(got[2], "key-conflict")


def test_mail_to_a_new_handle_says_new_mailbox_and_is_delivered(shared, who):
    a = shared.ok("mail", "send", who, "-m", "typo?")
    assert a["new_mailbox"] is True and a["live"] is False
    assert files(shared, who) == [a["mail_id"] + ".md"]
    assert shared.ok("mail", "send", who, "-m", "again")["new_mailbox"] is False
    r = shared.bench("mail", "send", f"{who}c", "-m", "x")
    assert r.rc == 0 and "new-mailbox" in r.out and f"{who}c" in r.out, r


def test_generated_keys_differ(shared, who):
    a = shared.ok("mail", "send", who, "-m", "same")
    b = shared.ok("mail", "send", who, "-m", "same")
    assert a["key"] != b["key"] and a["mail_id"] != b["mail_id"]
    assert b["duplicate"] is False
    assert len(files(shared, who)) == 2


def test_same_key_after_restart(daemon):
    a = daemon.ok("mail", "send", "alice", "-m", "one", "--key", "k-restart")
    daemon.restart()
    b = daemon.ok("mail", "send", "alice", "-m", "one", "--key", "k-restart")
    assert b["mail_id"] == a["mail_id"] and b["duplicate"] is True
    assert files(daemon, "alice") == [a["mail_id"] + ".md"]


def test_same_key_after_kill9(daemon):
    a = daemon.ok("mail", "send", "alice", "-m", "one", "--key", "k-crash")
    daemon.kill9()
    daemon.start()
    b = daemon.ok("mail", "send", "alice", "-m", "one", "--key", "k-crash")
    assert b["mail_id"] == a["mail_id"] and b["duplicate"] is True
    assert files(daemon, "alice") == [a["mail_id"] + ".md"]
    c = daemon.ok("mail", "send", "alice", "-m", "three")
    assert c["mail_id"] > a["mail_id"]


def test_same_key_after_the_message_was_read(shared, who):
    a = shared.ok("mail", "send", who, "-m", "one", "--key", f"{who}-read")
    shared.ok("mail", "read", a["mail_id"], "--handle", who)
    b = shared.ok("mail", "send", who, "-m", "one", "--key", f"{who}-read")
    assert b["mail_id"] == a["mail_id"] and b["duplicate"] is True
    assert os.path.exists(b["path"])  # the path where the message is now
    assert files(shared, who) == []


def test_bad_keys_refused(shared, who):
    refused(shared, "bad-key", "mail", "send", who, "-m", "x", "--key", "a\nb")
    refused(shared, "bad-key", "mail", "send", who, "-m", "x", "--key", "k" * 5000)
    refused(shared, "bad-key", "mail", "send", who, "-m", "x", "--key", "")
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))


# ---------------------------------------------------------------- list


def test_list_is_metadata_only_with_default_cap(shared, who):
    with shared.connect() as c:
        ids = [
            c.call(
                {"verb": "mail/send", "to": who, "subject": f"s{i}", "body": f"SECRET-BODY-{i}"}
            )["mail_id"]
            for i in range(60)
        ]
    r = shared.bench("mail", "list", "--handle", who, "--json")
    assert r.rc == 0
    assert "SECRET-BODY" not in r.out
    a = r.json
    assert a["total"] == 60 and a["cap"] == 50 and a["truncated"] is True
    assert len(a["messages"]) == 50
    assert [m["mail_id"] for m in a["messages"]] == ids[:50]
    for m in a["messages"]:
        assert set(m) == META_KEYS, m
        assert m["from"] == "operator" and m["state"] == "unread"
        assert DATE_RE.fullmatch(m["date"])
    assert a["messages"][3]["subject"] == "s3"
    assert a["messages"][3]["size"] == len("SECRET-BODY-3")
    b = shared.ok("mail", "list", "--handle", who, "--cursor", a["cursor"])
    assert [m["mail_id"] for m in b["messages"]] == ids[50:]
    assert b["total"] == 60 and b["truncated"] is False
    human = shared.bench("mail", "list", "--handle", who)
    assert human.rc == 0 and "SECRET-BODY" not in human.out and ids[0] in human.out
    assert a["cursor"] in human.out  # the human form says how to continue


def test_list_limits(shared, who):
    with shared.connect() as c:
        for i in range(3):
            c.call({"verb": "mail/send", "to": who, "body": str(i)})
    a = shared.ok("mail", "list", "--handle", who, "--limit", "500")
    assert a["cap"] == 500 and a["total"] == 3 and a["truncated"] is False
    a = shared.ok("mail", "list", "--handle", who, "--limit", "1")
    assert len(a["messages"]) == 1 and a["truncated"] is True and a["total"] == 3
    refused(shared, "bad-limit", "mail", "list", "--handle", who, "--limit", "501")
    refused(shared, "bad-limit", "mail", "list", "--handle", who, "--limit", "0")
    refused(shared, "bad-limit", "mail", "list", "--handle", who, "--limit", "-1")
    refused(shared, "bad-cursor", "mail", "list", "--handle", who, "--cursor", "../x")


def test_list_states(shared, who):
    with shared.connect() as c:
        ids = [
            c.call({"verb": "mail/send", "to": who, "body": str(i)})["mail_id"] for i in range(4)
        ]
    shared.ok("mail", "read", ids[1], "--handle", who)
    shared.ok("mail", "read", ids[3], "--handle", who)

    def listed(*state):
        a = shared.ok("mail", "list", "--handle", who, *state)
        return [(m["mail_id"], m["state"]) for m in a["messages"]], a["total"]

    assert listed() == ([(ids[0], "unread"), (ids[2], "unread")], 2)
    assert listed("--state", "unread") == listed()
    assert listed("--state", "read") == ([(ids[1], "read"), (ids[3], "read")], 2)
    assert listed("--state", "all") == (
        [(ids[0], "unread"), (ids[1], "read"), (ids[2], "unread"), (ids[3], "read")],
        4,
    )
    r = shared.bench("mail", "list", "--handle", who, "--state", "bogus")
    assert r.rc == 2 and "Traceback" not in r.err


def test_list_of_an_empty_or_unknown_mailbox(shared, who):
    a = shared.ok("mail", "list", "--handle", who)
    assert a["messages"] == [] and a["total"] == 0 and a["truncated"] is False
    assert not os.path.exists(os.path.join(shared.dir, "mail", who))


# ---------------------------------------------------------------- read


def test_read_retires_and_never_deletes(shared, who):
    a = shared.ok("mail", "send", who, "-s", "subj", "-m", "the body\n")
    inbox_path = a["path"]
    got = shared.ok("mail", "read", a["mail_id"], "--handle", who)
    read_path = os.path.join(box(shared, who, "read"), a["mail_id"] + ".md")
    assert got["retired"] is True
    assert got["path"] == read_path
    assert got["body"] == "the body\n" and got["subject"] == "subj"
    assert got["from"] == "operator" and got["to"] == who
    assert got["mail_id"] == a["mail_id"] and DATE_RE.fullmatch(got["date"])
    assert not os.path.exists(inbox_path)
    assert os.path.exists(read_path)
    meta, body = split(read_path)
    assert meta["id"] == a["mail_id"] and body == b"the body\n"
    again = shared.ok("mail", "read", a["mail_id"], "--handle", who)
    assert again["retired"] is False
    assert again["body"] == got["body"] and again["path"] == read_path
    assert files(shared, who, "read") == [a["mail_id"] + ".md"]
    assert files(shared, who) == []


def test_read_without_id_gives_the_oldest_unread(shared, who):
    with shared.connect() as c:
        ids = [
            c.call({"verb": "mail/send", "to": who, "body": f"b{i}"})["mail_id"] for i in range(3)
        ]
    shared.ok("mail", "read", ids[0], "--handle", who)
    got = shared.ok("mail", "read", "--handle", who)
    assert got["mail_id"] == ids[1] and got["body"] == "b1"
    got = shared.ok("mail", "read", "--handle", who)
    assert got["mail_id"] == ids[2]
    refused(shared, "no-unread", "mail", "read", "--handle", who)
    refused(shared, "no-unread", "mail", "read", "--handle", f"{who}n")  # no mailbox


def test_read_human_output_mentions_the_path(shared, who):
    a = shared.ok("mail", "send", who, "-s", "sub", "-m", "BODY TEXT")
    r = shared.bench("mail", "read", "--handle", who)
    assert r.rc == 0
    assert a["mail_id"] in r.out and "BODY TEXT" in r.out
    assert os.path.join(box(shared, who, "read"), a["mail_id"] + ".md") in r.out


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc/passwd",
        "x",
        "a/b",
        "../inbox/x",
        "20261130T045611.123Z-0001/../../x",
        "/etc/passwd",
        "..",
    ],
)
def test_bad_ids_refused_and_nothing_touched(shared, who, bad):
    a = shared.ok("mail", "send", who, "-m", "x")
    before = mail_tree(shared)
    parent = os.path.dirname(shared.dir)
    refused(shared, "bad-id", "mail", "read", bad, "--handle", who)
    with shared.connect() as c:
        r = c.send({"verb": "mail/read", "handle": who, "mail_id": bad})
        r = c.recv()
    assert_refused(r, "bad-id")
    assert mail_tree(shared) == before
    assert os.path.exists(a["path"])
    for p in (
        os.path.join(shared.dir, "etc"),
        os.path.join(parent, "etc", "passwd.md"),
        os.path.join(shared.dir, "mail", who, "read", "x.md"),
    ):
        assert not os.path.exists(p)


def test_unknown_id_is_no_such_message(shared, who):
    shared.ok("mail", "send", who, "-m", "x")
    refused(shared, "no-such-message", "mail", "read", "20200101T000000.000Z-0001", "--handle", who)


def test_read_events_logged(shared, who):
    a = shared.ok("mail", "send", who, "-m", "x")
    shared.ok("mail", "read", "--handle", who)
    shared.ok("mail", "read", a["mail_id"], "--handle", who)  # again: not a new event
    reads = [e for e in shared.events(kind="mail/read") if e["handle"] == who]
    assert len(reads) == 1
    assert reads[0]["mail_id"] == a["mail_id"] and reads[0]["handle"] == who
    assert reads[0]["reader"] == "operator"


# ---------------------------------------------------------------- caps


def test_body_cap(shared, who):
    cap = caps(shared)["body_bytes"]
    assert cap > 0
    a = shared.ok("mail", "send", who, input="b" * cap)
    _, body = split(a["path"])
    assert len(body) == cap
    before = mail_tree(shared)
    refused(shared, "body-too-large", "mail", "send", who, input="b" * (cap + 1))
    assert mail_tree(shared) == before
    if cap % 2 == 0:  # bytes, not characters
        shared.ok("mail", "send", who, input="é" * (cap // 2))
        refused(shared, "body-too-large", "mail", "send", who, input="é" * (cap // 2) + "a")


def test_m_body_both_sides_of_the_skipped_hello(shared, who):
    # Up to 64 KiB a -m body goes without asking the daemon's caps first; above that the
    # CLI asks (a single argument is at most 128 KiB on Linux). Both arrive whole.
    for size in (64 * 1024, 100 * 1024):
        a = shared.ok("mail", "send", who, "-m", "m" * size)
        _, body = split(a["path"])
        assert len(body) == size


def test_subject_cap(shared, who):
    cap = caps(shared)["subject_chars"]
    assert cap > 0
    a = shared.ok("mail", "send", who, "-s", "é" * cap, "-m", "x")
    meta, _ = split(a["path"])
    assert meta["subject"] == "é" * cap
    before = mail_tree(shared)
    refused(shared, "subject-too-long", "mail", "send", who, "-s", "s" * (cap + 1), "-m", "x")
    assert mail_tree(shared) == before


# ---------------------------------------------------------------- handles


@pytest.mark.parametrize(
    "bad", ["Bob", "..", "a/b", "a" * 65, "", "../x", "a b", ".hidden", "-dash", "bob\n"]
)
def test_bad_handles_refused_and_nothing_created(shared, who, bad):
    before = tree(shared.dir)
    refused(shared, "bad-handle", "mail", "send", "-m", "x", "--", bad)
    refused(shared, "bad-handle", "mail", "list", f"--handle={bad}")
    refused(shared, "bad-handle", "mail", "read", f"--handle={bad}")
    refused(shared, "bad-handle", "mail", "send", who, "-m", "x", f"--reply-to={bad}")
    after = tree(shared.dir)
    assert {k for k in after if k.startswith("mail")} == {k for k in before if k.startswith("mail")}


def test_nul_in_handle_refused(daemon):
    r = raw_send(daemon, "a\x00b")
    assert_refused(r, "bad-handle")
    assert not os.path.exists(os.path.join(daemon.dir, "mail"))


def test_longest_handle_ok(shared, who):
    h = "a" * 64
    a = shared.ok("mail", "send", h, "-m", "x")
    assert a["to"] == h and os.path.exists(a["path"])


def test_in_reply_to(shared, who):
    a = shared.ok("mail", "send", who, "-m", "question")
    b = shared.ok("mail", "send", "operator", "-m", "answer", "--in-reply-to", a["mail_id"])
    meta, _ = split(b["path"])
    assert meta["in-reply-to"] == a["mail_id"]
    got = shared.ok("mail", "read", b["mail_id"])
    assert got["in_reply_to"] == a["mail_id"]
    refused(shared, "bad-id", "mail", "send", who, "-m", "x", "--in-reply-to", "../x")


def test_exactly_a_page_is_not_truncated(shared, who):
    with shared.connect() as c:
        for i in range(50):
            c.call({"verb": "mail/send", "to": who, "body": str(i)})
    a = shared.ok("mail", "list", "--handle", who)
    assert len(a["messages"]) == 50 and a["total"] == 50
    assert a["truncated"] is False and a.get("cursor") is None
    b = shared.ok("mail", "list", "--handle", who, "--limit", "49")
    assert b["truncated"] is True and b["cursor"] == a["messages"][48]["mail_id"]
    c = shared.ok("mail", "list", "--handle", who, "--cursor", b["cursor"])
    assert [m["mail_id"] for m in c["messages"]] == [a["messages"][49]["mail_id"]]
    assert c["truncated"] is False


def test_spare_files_are_bounded_by_their_option_and_none_is_a_choice(make_daemon):
    """Sends stage their messages in spares made ahead (at most --spare-files of them,
    empty, private); with --spare-files 0 none is made and each send makes its own file."""
    d = make_daemon("--spare-files", "4")
    spare = os.path.join(d.dir, "spare")
    d.wait_until(lambda: os.path.isdir(spare) and len(os.listdir(spare)) >= 4, what="spares")
    for i in range(6):
        d.ok("mail", "send", "box", "-m", f"n {i}")
    d.wait_until(lambda: 2 <= len(os.listdir(spare)) <= 4, what="spares refilled")
    for name in os.listdir(spare):
        st = os.stat(os.path.join(spare, name))
        assert st.st_size == 0 and st.st_mode & 0o077 == 0
    assert d.ok("mail", "list", "--handle", "box")["total"] == 6
    d.stop()
    none = make_daemon("--spare-files", "0")
    none.ok("mail", "send", "box", "-m", "own file")
    assert none.ok("mail", "list", "--handle", "box")["total"] == 7
    # An earlier run's spares stay until a start that keeps spares empties the dir.
    assert all(os.path.getsize(os.path.join(spare, n)) == 0 for n in os.listdir(spare))
