"""Agent jobs and reply fan-out, end to end through the real daemon and CLI.

A job is `bench spawn --name child --mail TASK.md --reply-to H... [--key K] -- CMD`. The
child records what it owes with `bench report`; when it settles every replyTo handle gets
one reply from the child, whose body is a small header and then the content:

    ---
    outcome: completed | failed | interrupted
    agentId: <child handle>
    sessionId: <child session id>
    ---

    <content>

Nothing here sleeps to synchronise: tests wait for events (job/settled, outbox/posted,
outbox/retry, ...) with deadlines. "Nothing more will come" is proven with a barrier: a
later job whose reply is posted only after the outbox has been drained past everything
written before it.
"""

import glob
import json
import os
import shlex
import signal
import time

import pytest
import yaml

from tests.conftest import standin_argv
from tests.support.refusal import assert_refused

# ------------------------------------------------------------------ helpers


def task_file(tmp_path, text: str = "Please do the thing.\n", name: str = "TASK.md") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def spawn_raw(d, argv, *, name=None, mail=None, reply_to=(), key=None, subject=None):
    """`bench spawn --json ... -- argv`; --json goes before `--` so it is not part of argv."""
    args = ["spawn", "--json"]
    if name is not None:
        args += ["--name", name]
    if mail is not None:
        args += ["--mail", mail]
    for h in reply_to:
        args += ["--reply-to", h]
    if key is not None:
        args += ["--key", key]
    if subject is not None:
        args += ["--subject", subject]
    return d.bench(*args, "--", *argv)


def spawn(d, argv, **kw) -> dict:
    r = spawn_raw(d, argv, **kw)
    assert r.rc == 0, r
    a = r.json
    assert a["ok"] is True, a
    return a


def job(
    d, tmp_path, name, script, reply_to=("parent",), key=None, task="Please do it.\n", subject=None
) -> dict:
    """Spawn a job whose child runs `bash -c script`."""
    mail = task_file(tmp_path, task, f"task-{name}.md")
    return spawn(
        d, ["bash", "-c", script], name=name, mail=mail, reply_to=reply_to, key=key, subject=subject
    )


def settled(d, handle, since=0, timeout=30.0) -> dict:
    return d.wait_event("job/settled", lambda e: e["handle"] == handle, timeout, since)


def posted_to(d, handle, since=0, timeout=30.0) -> dict:
    return d.wait_event("outbox/posted", lambda e: e["to"] == handle, timeout, since)


def posted_keys(d, prefix: str, since: int = 0) -> list[str]:
    """Keys of the outbox/posted events for replies of the job keyed `prefix`, in log order."""
    return [
        e["key"]
        for e in d.events(since=since, kind="outbox/posted")
        if e["key"].startswith(f"outbox:{prefix}:")
    ]


def header(outcome: str, agent: str, session: str, **details) -> str:
    """The reply header; a completed job's says it exited with code 0 unless told."""
    if not details and outcome == "completed":
        details = {"ended": "exited", "exitCode": 0}
    extra = "".join(f"{k}: {v}\n" for k, v in details.items())
    return f"---\noutcome: {outcome}\nagentId: {agent}\nsessionId: {session}\n{extra}---\n\n"


def nothing_reported(session: str, handle: str, how: str) -> str:
    return (
        f"The job reported nothing: session {session} ({handle}) {how}. "
        f"Its scrollback: bench tail {session}\n"
    )


def mailbox(d, handle) -> list[dict]:
    """Every message in a mailbox (inbox and read), parsed from the files themselves."""
    out = []
    for sub in ("inbox", "read"):
        for path in glob.glob(os.path.join(d.dir, "mail", handle, sub, "*.md")):
            with open(path, "rb") as f:
                data = f.read()
            assert data.startswith(b"---\n"), path
            head, sep, body = data[4:].partition(b"\n---\n\n")
            assert sep, path
            meta = yaml.safe_load(head.decode("utf-8"))
            out.append({"meta": meta, "body": body.decode("utf-8"), "path": path})
    return sorted(out, key=lambda m: m["meta"]["id"])


def listed_total(d, handle) -> int:
    """How many messages `bench mail list --state all` says the mailbox holds."""
    a = d.ok("mail", "list", "--handle", handle, "--state", "all")
    assert a["truncated"] is False or a["total"] > a["cap"], a
    return a["total"]


def listed_from(d, handle, sender) -> list[dict]:
    """What `bench mail list --state all` lists in a mailbox from one sender."""
    a = d.ok("mail", "list", "--handle", handle, "--state", "all", "--limit", "500")
    assert a["truncated"] is False, a
    return [m for m in a["messages"] if m["from"] == sender]


def barrier(d, tmp_path, tag: str) -> None:
    """Run a quick job and wait for its reply: the outbox has drained past what came before."""
    witness = f"witness-{tag}"
    job(d, tmp_path, f"barrier-{tag}", "exit 0", reply_to=(witness,), key=f"zz-barrier-{tag}")
    posted_to(d, witness)


def kill_leftover(pid: int) -> None:
    """End a child this test started if it outlived its daemon (only if it is still `sleep`)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return
    if b"sleep" in cmd:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def arm_post_fault(d, count: int, err: str = "EIO") -> None:
    a = d.call({"verb": "debug/fault", "point": "post", "errno": err, "count": count})
    assert a["ok"] is True, a


# ------------------------------------------------------------------ 1. completed


def test_completed_reply_has_the_exact_header_and_content(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    a = job(
        shared, tmp_path, child, "bench report 'all done: 42'", key="task-1", reply_to=(parent,)
    )
    st = settled(shared, child)
    assert st["outcome"] == "completed" and st["replies"] == 1 and st["recovered"] is False
    assert st["session"] == a["session"] and st["key"] == "task-1"
    posted = posted_to(shared, parent)
    assert posted["key"] == "outbox:task-1:reply:0"

    got = shared.ok("mail", "read", "--handle", parent, posted["mail_id"])
    assert got["body"] == header("completed", child, a["session"]) + "all done: 42"
    assert got["from"] == child and got["to"] == parent
    assert "completed" in got["subject"]
    assert got["key"] == "outbox:task-1:reply:0"

    # The file is the record: its front matter (YAML) and the body's header agree.
    (msg,) = mailbox(shared, parent)
    assert msg["meta"]["from"] == child and msg["meta"]["to"] == parent
    assert msg["meta"]["key"] == "outbox:task-1:reply:0"
    hdr = yaml.safe_load(msg["body"].split("\n---\n\n", 1)[0].removeprefix("---\n"))
    assert hdr == {
        "outcome": "completed",
        "agentId": child,
        "sessionId": a["session"],
        "ended": "exited",
        "exitCode": 0,
    }


def test_completed_without_a_report_says_what_happened(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    a = job(shared, tmp_path, child, "exit 0", reply_to=(parent,))
    assert settled(shared, child)["outcome"] == "completed"
    posted_to(shared, parent)
    (msg,) = mailbox(shared, parent)
    assert msg["body"] == header("completed", child, a["session"]) + nothing_reported(
        a["session"], child, "exited with code 0"
    )


def test_a_live_parent_is_woken_by_its_reply(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    spawn(shared, standin_argv(), name=parent)
    job(shared, tmp_path, child, "bench report 'woken?'", reply_to=(parent,))
    posted = posted_to(shared, parent)
    woken = shared.wait_event("agent/woken", lambda e: e.get("mail_id") == posted["mail_id"])
    assert woken["handle"] == parent and woken["from"] == child
    shared.ok("kill", parent)


# ------------------------------------------------------------------ 2. interrupted


@pytest.mark.parametrize(
    "script,exit_code,sig,details",
    [
        (
            "bench report 'half of it'; exit 3",
            3,
            None,
            {"reason": "exit-code", "ended": "exited", "exitCode": 3},
        ),
        (
            "bench report 'half of it'; kill -9 $$",
            None,
            9,
            {"reason": "signal", "ended": "signalled", "signal": "SIGKILL"},
        ),
    ],
    ids=["exit-3", "signal-9"],
)
def test_a_failed_child_replies_failed(shared, who, tmp_path, script, exit_code, sig, details):
    child, parent = who + "c", who + "p"
    a = job(shared, tmp_path, child, script, reply_to=(parent,))
    ex = shared.wait_event("session/exited", lambda e: e["handle"] == child)
    assert ex["exit"] == exit_code and ex["signal"] == sig
    st = settled(shared, child)
    assert st["outcome"] == "failed" and st["replies"] == 1
    assert st["reason"] == details["reason"]
    posted_to(shared, parent)
    got = shared.ok("mail", "read", "--handle", parent)
    assert got["body"] == header("failed", child, a["session"], **details) + "half of it"
    assert got["subject"] == "Re: task (failed)" and got["from"] == child
    # The same word in ps --json as in the event and the reply.
    (row,) = [s for s in shared.ok("ps", "-a")["sessions"] if s["session"] == a["session"]]
    assert (row["outcome"], row["reason"]) == ("failed", details["reason"])


def test_a_plain_kill_is_not_a_cancel_it_replies_interrupted(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    a = job(shared, tmp_path, child, "bench report 'so far'; exec sleep 30", reply_to=(parent,))
    shared.wait_event("job/reported", lambda e: e["handle"] == child)
    shared.ok("kill", child)
    st = settled(shared, child)
    assert st["outcome"] == "interrupted" and st["replies"] == 1 and st["reason"] == "killed"
    posted_to(shared, parent)
    (msg,) = mailbox(shared, parent)
    assert (
        msg["body"]
        == header(
            "interrupted",
            child,
            a["session"],
            reason="killed",
            ended="killed",
            signal="SIGHUP",
            killedBy="operator",
        )
        + "so far"
    )


# ------------------------------------------------------------------ 3. several replyTo


def test_each_reply_to_address_gets_exactly_one_reply(shared, who, tmp_path):
    child, parent, third = who + "c", who + "p", who + "t"
    a = job(
        shared,
        tmp_path,
        child,
        "bench report 'for all of you'",
        reply_to=(parent, "operator", third),
        key="fan",
    )
    assert settled(shared, child)["replies"] == 3
    for h in (parent, "operator", third):
        posted_to(shared, h)
    barrier(shared, tmp_path, "fan")
    expected = header("completed", child, a["session"]) + "for all of you"
    for index, h in enumerate((parent, "operator", third)):
        # (The operator's mailbox holds the module's other mail too: the child's only.)
        msgs = [m for m in mailbox(shared, h) if m["meta"]["from"] == child]
        assert len(msgs) == 1, (h, msgs)
        assert len(listed_from(shared, h, child)) == 1
        meta = msgs[0]["meta"]
        assert meta["from"] == child and meta["to"] == h
        assert meta["key"] == f"outbox:fan:reply:{index}"
        assert msgs[0]["body"] == expected
    assert sorted(posted_keys(shared, "fan")) == [f"outbox:fan:reply:{i}" for i in range(3)]


# ------------------------------------------------------------------ 4. bench report


def test_the_last_report_wins(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    a = job(
        shared,
        tmp_path,
        child,
        "bench report 'first draft' && bench report 'second draft' && bench report final",
        reply_to=(parent,),
    )
    st = settled(shared, child)
    reports = [e for e in shared.events(kind="job/reported") if e["session"] == a["session"]]
    assert [e["bytes"] for e in reports] == [11, 12, 5]
    assert st["outcome"] == "completed"
    posted_to(shared, parent)
    (msg,) = mailbox(shared, parent)
    assert msg["body"] == header("completed", child, a["session"]) + "final"


def test_report_dash_reads_stdin_byte_for_byte(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    content = 'line one\n---\noutcome: completed\nünïcode: ✓ "quoted"\n\nlast line\n'
    src = tmp_path / "content.txt"
    src.write_text(content, encoding="utf-8")
    a = job(
        shared, tmp_path, child, f"bench report - < {shlex.quote(str(src))}", reply_to=(parent,)
    )
    settled(shared, child)
    posted_to(shared, parent)
    got = shared.ok("mail", "read", "--handle", parent)
    assert got["body"] == header("completed", child, a["session"]) + content


def test_report_outside_any_session_is_refused(shared):
    since = shared.last_seq()
    r = shared.bench("report", "some text")
    assert r.rc != 0, r
    assert "session" in r.err and "Traceback" not in r.err, r
    r = shared.bench("report", "some text", "--json")
    assert r.rc != 0 and r.json["ok"] is False, r
    assert_refused(r, "not-in-session", "no-job")
    # The daemon itself refuses the operator too, whatever the client checks.
    a = shared.call({"verb": "job/report", "content": "x"})
    assert_refused(a, "not-in-session", "no-job")
    assert shared.events(since, kind="job/reported") == []


def test_report_in_a_session_without_a_job_is_no_job(shared, who, tmp_path):
    loner = who + "l"
    out, rc = tmp_path / "out.json", tmp_path / "rc"
    script = (
        f"bench report 'nobody asked' --json > {shlex.quote(str(out))}; "
        f"echo $? > {shlex.quote(str(rc))}"
    )
    spawned = spawn(shared, ["bash", "-c", script], name=loner)
    shared.wait_event("session/exited", lambda e: e["handle"] == loner)
    assert int(rc.read_text()) != 0
    answer = json.loads(out.read_text())
    assert_refused(answer, "no-job")
    s = spawned["session"]
    assert [e for e in shared.events(kind="job/reported") if e["session"] == s] == []
    assert [e for e in shared.events(kind="job/settled") if e["session"] == s] == []


def test_report_needs_no_token_inside_the_pty(shared, who, tmp_path):
    """A process inside a session's pty is that session, token or not (the daemon
    identifies it by its process session, as it does for `bench mail send`)."""
    child, parent = who + "c", who + "p"
    rc = tmp_path / "rc"
    a = job(
        shared,
        tmp_path,
        child,
        f"env -u BENCH_TOKEN bench report 'no token'; echo $? > {shlex.quote(str(rc))}",
        reply_to=(parent,),
    )
    settled(shared, child)
    posted_to(shared, parent)
    assert rc.read_text().strip() == "0"
    (msg,) = mailbox(shared, parent)
    assert msg["body"] == header("completed", child, a["session"]) + "no token"


def test_a_report_over_the_cap_is_refused_and_the_last_good_one_stands(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    rc = tmp_path / "rc"
    script = (
        "bench report 'good one' && "
        "head -c 300000 /dev/zero | tr '\\0' x | bench report - 2>/dev/null; "
        f"echo $? > {shlex.quote(str(rc))}"
    )
    a = job(shared, tmp_path, child, script, reply_to=(parent,))
    settled(shared, child)
    posted_to(shared, parent)
    assert int(rc.read_text()) != 0
    (msg,) = mailbox(shared, parent)
    assert msg["body"] == header("completed", child, a["session"]) + "good one"


# ------------------------------------------------------------------ 5. cancel is quiet


def test_cancel_sends_no_reply_at_all(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    a = job(
        shared,
        tmp_path,
        child,
        "bench report 'not for you'; exec sleep 30",
        reply_to=(parent, "operator"),
        key="quiet",
    )
    shared.wait_event("job/reported", lambda e: e["session"] == a["session"])
    k = shared.ok("kill", child, "--cancel")
    assert k["session"] == a["session"]
    st = settled(shared, child)
    assert st["outcome"] == "cancelled" and st["replies"] == 0
    barrier(shared, tmp_path, "cancel")
    assert listed_total(shared, parent) == 0 and mailbox(shared, parent) == []
    assert [m for m in mailbox(shared, "operator") if m["meta"]["from"] == child] == []
    for kind in ("outbox/posted", "outbox/retry"):
        assert [e for e in shared.events(kind=kind) if "quiet" in e["key"]] == []


# ------------------------------------------------------------------ 6. no mail, no job


def test_a_plain_spawn_sends_nothing_and_settles_no_job(shared, who, tmp_path):
    plain = who + "n"
    a = spawn(shared, ["bash", "-c", "exit 0"], name=plain)
    assert a.get("mail_id") is None
    ex = shared.wait_event("session/exited", lambda e: e["handle"] == plain)
    assert ex["exit"] == 0
    barrier(shared, tmp_path, plain)
    assert [e for e in shared.events(kind="job/settled") if e["handle"] == plain] == []
    assert [e for e in shared.events(kind="mail/sent") if e["from"] == plain] == []
    spawned = shared.wait_event("session/spawned", lambda e: e["handle"] == plain)
    assert spawned["job"] is False


def test_reply_to_without_mail_is_a_usage_error_and_spawns_nothing(shared, who):
    child, parent = who + "c", who + "p"
    r = shared.bench("spawn", "--name", child, "--reply-to", parent, "--", "sleep", "30")
    assert r.rc == 2 and "--mail" in r.err, r
    assert [e for e in shared.events(kind="session/spawned") if e["handle"] == child] == []


def test_a_job_without_reply_to_settles_quietly(shared, who, tmp_path):
    child = who + "c"
    job(shared, tmp_path, child, "bench report 'to nobody'", reply_to=())
    st = settled(shared, child)
    assert st["outcome"] == "completed" and st["replies"] == 0
    barrier(shared, tmp_path, "noreply")
    assert [e for e in shared.events(kind="mail/sent") if e["from"] == child] == []


# ------------------------------------------------------------------ 7. the task mail


def test_the_task_mail_reaches_the_child_from_the_operator_with_its_key(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    task = "Count to three.\n---\nstep: 1\n"
    a = job(
        shared,
        tmp_path,
        child,
        "exec sleep 30",
        reply_to=(parent,),
        key="task-7",
        task=task,
        subject="counting job",
    )
    assert a["mail_id"]
    sent = shared.wait_event("mail/sent", lambda e: e["mail_id"] == a["mail_id"])
    assert sent["from"] == "operator" and sent["to"] == child and sent["key"] == "task-7"
    got = shared.ok("mail", "read", "--handle", child, a["mail_id"])
    assert got["from"] == "operator" and got["to"] == child
    assert got["key"] == "task-7" and got["body"] == task and got["subject"] == "counting job"
    assert got["reply_to"] == [parent]
    (msg,) = mailbox(shared, child)
    assert msg["meta"]["key"] == "task-7" and msg["meta"]["from"] == "operator"
    shared.ok("kill", child, "--cancel")
    settled(shared, child)


def test_the_child_reads_its_task_from_its_own_mailbox(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    out = tmp_path / "task.json"
    # The task is delivered just after the spawn; poll for it (quietly, so no wake retires it).
    script = (
        f"for i in $(seq 200); do bench mail read --json > {shlex.quote(str(out))} "
        "2>/dev/null && break; sleep 0.05; done; "
        f"bench report - < {shlex.quote(str(out))}"
    )
    a = job(shared, tmp_path, child, script, task="find the answer", reply_to=(parent,))
    settled(shared, child)
    posted_to(shared, parent)
    task = json.loads(out.read_text())
    assert task["mail_id"] == a["mail_id"] and task["body"] == "find the answer"
    assert task["from"] == "operator"


@pytest.mark.parametrize(
    "key",
    [
        "k" * 256,
        "task: with spaces, 'quotes' & \"double\"",
        "---",
        "ünïcode-ключ",
        "nested:reply:7",
    ],
    ids=["256-chars", "punctuation", "dashes", "unicode", "reply-infix"],
)
def test_any_valid_key_gets_its_reply(shared, who, tmp_path, key):
    child, parent = who + "c", who + "p"
    a = job(shared, tmp_path, child, "bench report keyed", key=key, reply_to=(parent,))
    st = settled(shared, child)
    assert st["key"] == key and st["replies"] == 1
    posted = posted_to(shared, parent)
    assert posted["key"] == f"outbox:{key}:reply:0"
    (msg,) = mailbox(shared, parent)
    assert msg["meta"]["key"] == f"outbox:{key}:reply:0"
    assert msg["body"] == header("completed", child, a["session"]) + "keyed"
    (task,) = mailbox(shared, child)
    assert task["meta"]["key"] == key


def test_an_overlong_key_is_refused_before_anything_is_spawned(shared, who, tmp_path):
    child, parent = who + "c", who + "p"
    r = spawn_raw(
        shared,
        ["sleep", "30"],
        name=child,
        mail=task_file(tmp_path),
        reply_to=(parent,),
        key="k" * 257,
    )
    assert_refused(r, "bad-key", rc=1)
    assert [e for e in shared.events(kind="session/spawned") if e["handle"] == child] == []


@pytest.mark.parametrize(
    "extra,body",
    [
        (["--key", "bad\x01key"], "task"),
        (["--subject", "two\nlines"], "task"),
        ([], "x" * (300 * 1024)),
    ],
    ids=["control-char-key", "newline-subject", "oversize-task"],
)
def test_a_refused_job_spawns_nothing(shared, who, tmp_path, extra, body):
    """A refusal is a refusal. If `bench spawn` answers an error, no child may be
    left running as a job that will later fan out replies (or retry them forever)."""
    child, parent = who + "c", who + "p"
    path = task_file(tmp_path, body)
    since = shared.last_seq()
    before = {s["session"] for s in shared.ok("ps", "-a")["sessions"]}
    r = shared.bench(
        "spawn",
        "--json",
        "--name",
        child,
        "--mail",
        path,
        "--reply-to",
        parent,
        *extra,
        "--",
        "sleep",
        "30",
    )
    assert r.rc == 1 and r.json["ok"] is False, r
    # Nothing started (the module's other tests may have left sessions of their own).
    started = [s for s in shared.ok("ps", "-a")["sessions"] if s["session"] not in before]
    assert started == [], started
    assert shared.events(since, kind="session/spawned") == []


def test_a_reused_job_key_never_swallows_a_task_or_its_replies(shared, who, tmp_path):
    """A second job with the key of a finished one must be refused, or be a whole job: its
    task in its own mailbox and its replies delivered. It must not answer ok with the mail
    id of the first child's task, give the second child nothing, and owe its parent nothing."""
    parent, first, second = who + "p", who + "f", who + "s"
    job(shared, tmp_path, first, "bench report one", key="same", reply_to=(parent,))
    settled(shared, first)
    posted_to(shared, parent)
    r = spawn_raw(
        shared,
        ["bash", "-c", "bench report two"],
        name=second,
        mail=task_file(tmp_path, "task two"),
        reply_to=(parent,),
        key="same",
    )
    if r.rc != 0:
        assert r.json["ok"] is False, r
        assert [e for e in shared.events(kind="session/spawned") if e["handle"] == second] == []
        return
    a = r.json
    st = settled(shared, second)
    tasks = mailbox(shared, second)
    assert [t["meta"]["id"] for t in tasks] == [a["mail_id"]], (a, tasks)
    assert tasks[0]["body"] == "task two"
    assert st["replies"] == 1, st
    shared.wait_until(lambda: len(mailbox(shared, parent)) == 2, 30, "two replies")


# ------------------------------------------------------------------ 8. refusing recipient


def test_a_refused_post_is_retried_with_backoff_then_delivered_once(make_daemon, tmp_path):
    d = make_daemon("--retry-base", "0.05")
    arm_post_fault(d, 2, "EIO")
    a = job(d, tmp_path, "child", "bench report 'eventually'", key="retry")
    assert settled(d, "child")["replies"] == 1
    posted = posted_to(d, "parent")
    barrier(d, tmp_path, "retry")
    key = "outbox:retry:reply:0"
    retries = [e for e in d.events(kind="outbox/retry") if e["key"] == key]
    assert len(retries) == 2, retries
    assert all(e["to"] == "parent" for e in retries)
    assert all("injected" in e["reason"] or "I/O" in e["reason"] for e in retries), retries
    # Backoff: the second try came at least retry-base after the first refusal.
    assert retries[1]["ts"] - retries[0]["ts"] >= 40
    assert retries[-1]["seq"] < posted["seq"]
    assert posted_keys(d, "retry") == [key]
    (msg,) = mailbox(d, "parent")
    assert listed_total(d, "parent") == 1
    assert msg["body"] == header("completed", "child", a["session"]) + "eventually"


def test_one_refusing_recipient_does_not_hold_up_the_others(make_daemon, tmp_path):
    d = make_daemon("--retry-base", "0.05")
    # One refusal: the first post of the drain (reply 0) fails; 1 and 2 go through at once.
    arm_post_fault(d, 1, "EIO")
    job(d, tmp_path, "child", "bench report hi", reply_to=("a", "b", "c"), key="mixed")
    for h in ("a", "b", "c"):
        posted_to(d, h)
    barrier(d, tmp_path, "mixed")
    for h in ("a", "b", "c"):
        assert len(mailbox(d, h)) == 1, h
    retries = [e["to"] for e in d.events(kind="outbox/retry")]
    assert retries == ["a"]


def test_retries_across_outbox_pages_lose_and_duplicate_nothing(make_daemon, tmp_path):
    """More refusals than one drain page (64 rows): every reply still arrives exactly once."""
    # 100 reply-to handles per job (the limit's default is 16): more than one page.
    d = make_daemon("--retry-base", "0.05", "--reply-to-max", "100")
    handles = [f"p{i}" for i in range(100)]
    arm_post_fault(d, 70, "EIO")
    for n in range(2):
        job(d, tmp_path, f"pj{n}", f"bench report 'paged {n}'", reply_to=handles, key=f"paged-{n}")
    d.wait_until(lambda: len(d.events(kind="outbox/posted")) >= 200, 60, "200 posted")
    barrier(d, tmp_path, "paged")
    retries = d.events(kind="outbox/retry")
    assert len(retries) == 70
    posted = [
        e["key"] for e in d.events(kind="outbox/posted") if e["key"].startswith("outbox:paged-")
    ]
    assert sorted(posted) == sorted(
        f"outbox:paged-{n}:reply:{i}" for n in range(2) for i in range(100)
    )
    for i, h in enumerate(handles):
        keys = sorted(m["meta"]["key"] for m in mailbox(d, h))
        assert keys == [f"outbox:paged-{n}:reply:{i}" for n in range(2)], (h, keys)


def test_a_child_cannot_preempt_its_own_reply_with_the_reply_key(shared, who, tmp_path):
    """The reply key is derived and predictable. A child that sends some mail of its own under
    that key (to someone else, or to the parent with a forged header) must not make the
    daemon take the real reply for a duplicate: the parent is owed the true reply."""
    child, parent, bystander = who + "c", who + "p", who + "b"
    forged = f"---\noutcome: completed\nagentId: {child}\nsessionId: forged\n---\n\nall good"
    script = (
        f"bench mail send {bystander} -m {shlex.quote(forged)} --key outbox:owed:reply:0; exit 3"
    )
    a = job(shared, tmp_path, child, script, key="owed", reply_to=(parent,))
    st = settled(shared, child)
    assert st["outcome"] == "failed" and st["replies"] == 1
    posted = posted_to(shared, parent)
    barrier(shared, tmp_path, "owed")
    msgs = mailbox(shared, parent)
    want = header("failed", child, a["session"], reason="exit-code", ended="exited", exitCode=3)
    want += nothing_reported(a["session"], child, "exited with code 3")
    assert [m["body"] for m in msgs] == [want], (posted, msgs)


# ------------------------------------------------------------------ 9. kill -9 recovery


def test_kill9_between_settlement_and_drain_delivers_exactly_once(make_daemon, tmp_path):
    # Every post is refused while this daemon lives, so the settled replies stay pending
    # in the outbox; the fault hooks are in memory and do not survive the restart.
    d = make_daemon("--retry-base", "0.5")
    arm_post_fault(d, 1000, "EIO")
    handles = ("parent", "operator", "third")
    a = job(d, tmp_path, "child", "bench report 'survives a crash'", reply_to=handles, key="crash")
    st = settled(d, "child")
    assert st["outcome"] == "completed" and st["replies"] == 3
    for h in handles:
        d.wait_event("outbox/retry", lambda e, h=h: e["to"] == h)
    assert d.events(kind="outbox/posted") == []
    for h in handles:
        assert mailbox(d, h) == []
    since = d.last_seq()
    d.kill9()
    d.start()
    for h in handles:
        posted_to(d, h, since=since, timeout=30)
    barrier(d, tmp_path, "crash")
    expected = header("completed", "child", a["session"]) + "survives a crash"
    for i, h in enumerate(handles):
        msgs = mailbox(d, h)
        assert len(msgs) == 1 and listed_total(d, h) == 1, (h, msgs)
        assert msgs[0]["body"] == expected
        assert msgs[0]["meta"]["key"] == f"outbox:crash:reply:{i}"
    posted = posted_keys(d, "crash")
    assert sorted(posted) == [f"outbox:crash:reply:{i}" for i in range(3)]
    # The job was settled once, before the crash; the restart did not settle it again.
    assert len([e for e in d.events(kind="job/settled") if e["handle"] == "child"]) == 1


def test_kill9_under_a_running_child_replies_interrupted_after_restart(make_daemon, tmp_path):
    d = make_daemon("--retry-base", "0.05")
    a = job(
        d,
        tmp_path,
        "child",
        "bench report 'partial work'; exec sleep 30",
        reply_to=("parent", "operator"),
        key="orphan",
    )
    try:
        d.wait_event("job/reported", lambda e: e["session"] == a["session"])
        d.kill9()
        d.start()
        st = settled(d, "child")
        assert st["outcome"] == "interrupted" and st["recovered"] is True
        assert st["reason"] == "daemon-stopped"
        assert st["replies"] == 2 and st["session"] == a["session"]
        for h in ("parent", "operator"):
            posted_to(d, h)
        barrier(d, tmp_path, "orphan")
        for h in ("parent", "operator"):
            (msg,) = mailbox(d, h)
            assert (
                msg["body"]
                == header(
                    "interrupted",
                    "child",
                    a["session"],
                    reason="daemon-stopped",
                    ended="daemon-stopped",
                )
                + "partial work"
            )
            assert msg["meta"]["from"] == "child"
        # A second restart does not settle it again.
        d.restart()
        barrier(d, tmp_path, "orphan2")
        assert len([e for e in d.events(kind="job/settled") if e["handle"] == "child"]) == 1
        for h in ("parent", "operator"):
            assert len(mailbox(d, h)) == 1
    finally:
        kill_leftover(a["pid"])


def test_a_clean_restart_under_a_running_child_replies_once(make_daemon, tmp_path):
    """`bench down` ends the sessions: the job settles as interrupted and its replies are
    delivered once, each with exactly one outbox/posted, all logged before daemon/stopped."""
    d = make_daemon("--retry-base", "0.05")
    handles = ("parent", "operator")
    a = job(
        d,
        tmp_path,
        "child",
        "bench report 'stopped early'; exec sleep 30",
        reply_to=handles,
        key="down",
    )
    d.wait_event("job/reported", lambda e: e["session"] == a["session"])
    d.restart()
    for h in handles:
        posted_to(d, h)
    barrier(d, tmp_path, "down")
    for h in handles:
        (msg,) = mailbox(d, h)
        assert (
            msg["body"]
            == header(
                "interrupted",
                "child",
                a["session"],
                reason="daemon-stopped",
                ended="killed",
                signal="SIGHUP",
                killedBy="benchd",
            )
            + "stopped early"
        )
    posted = posted_keys(d, "down")
    assert sorted(posted) == ["outbox:down:reply:0", "outbox:down:reply:1"], posted
    evs = d.events()
    stopped = next(i for i, e in enumerate(evs) if e["kind"] == "daemon/stopped")
    assert evs[stopped + 1]["kind"] == "daemon/started", evs[stopped - 3 : stopped + 3]


# ------------------------------------------------------------------ 10. many replies


def test_a_thousand_replies_drain_in_pages_without_loss(make_daemon, tmp_path):
    # 100 reply-to handles per job (the limit's default is 16): pages of replies to drain.
    daemon = make_daemon("--reply-to-max", "100")
    jobs, fan = 10, 100
    handles = [f"r{i}" for i in range(fan)]
    t0 = time.monotonic()
    sessions = {}
    for n in range(jobs):
        a = job(
            daemon, tmp_path, f"j{n}", f"bench report 'job {n}'", reply_to=handles, key=f"bulk-{n}"
        )
        sessions[n] = a["session"]
    t_spawned = time.monotonic()
    daemon.wait_until(
        lambda: len(daemon.events(kind="outbox/posted")) >= jobs * fan,
        120,
        f"{jobs * fan} outbox/posted events",
    )
    t_drained = time.monotonic()
    settles = [e for e in daemon.events(kind="job/settled") if e["handle"].startswith("j")]
    assert sorted(e["replies"] for e in settles) == [fan] * jobs
    barrier(daemon, tmp_path, "bulk")

    posted = [e for e in daemon.events(kind="outbox/posted") if e["key"].startswith("outbox:bulk-")]
    keys = [e["key"] for e in posted]
    assert len(keys) == jobs * fan and len(set(keys)) == jobs * fan
    assert set(keys) == {f"outbox:bulk-{n}:reply:{i}" for n in range(jobs) for i in range(fan)}
    assert len({e["mail_id"] for e in posted}) == jobs * fan
    assert daemon.events(kind="outbox/retry") == []
    for i, h in enumerate(handles):
        msgs = mailbox(daemon, h)
        assert len(msgs) == jobs, (h, len(msgs))
        a = daemon.call({"verb": "mail/list", "handle": h, "state": "all"})
        assert a["ok"] and a["total"] == jobs, a
        by_key = {m["meta"]["key"]: m for m in msgs}
        assert set(by_key) == {f"outbox:bulk-{n}:reply:{i}" for n in range(jobs)}
        for n in range(jobs):
            m = by_key[f"outbox:bulk-{n}:reply:{i}"]
            assert m["meta"]["from"] == f"j{n}" and m["meta"]["to"] == h
            assert m["body"] == header("completed", f"j{n}", sessions[n]) + f"job {n}"
    print(
        f"\n1000 replies: spawned in {t_spawned - t0:.1f}s, "
        f"all posted after {t_drained - t0:.1f}s, checked after {time.monotonic() - t0:.1f}s"
    )


# ------------------------------------------------------------------ 11. replay


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_a_restart_after_delivery_posts_nothing_again(make_daemon, tmp_path, how):
    d = make_daemon("--retry-base", "0.05")
    handles = ("parent", "operator", "third")
    job(d, tmp_path, "child", "bench report 'delivered once'", reply_to=handles, key="replay")
    settled(d, "child")
    for h in handles:
        posted_to(d, h)
    barrier(d, tmp_path, "before")
    before = {h: [m["meta"]["id"] for m in mailbox(d, h)] for h in handles}
    assert all(len(ids) == 1 for ids in before.values()), before
    since = d.last_seq()
    if how == "clean":
        d.restart()
    else:
        d.kill9()
        d.start()
    barrier(d, tmp_path, "after")
    assert posted_keys(d, "replay", since) == []
    assert [e for e in d.events(since=since, kind="job/settled") if e["handle"] == "child"] == []
    for h in handles:
        assert [m["meta"]["id"] for m in mailbox(d, h)] == before[h]
        assert listed_total(d, h) == 1


def test_ps_shows_a_jobs_reply_to_handles(shared, who, tmp_path):
    parent, plain, owing = who + "p", who + "n", who + "o"
    d = shared
    job(d, tmp_path, owing, "sleep 600", reply_to=(parent, "operator"))
    spawn(d, ["sleep", "600"], name=plain)
    rows = {s["handle"]: s for s in d.ok("ps")["sessions"]}
    assert rows[owing]["job"] is True and rows[owing]["reply_to"] == [parent, "operator"]
    assert rows[plain]["job"] is False and rows[plain]["reply_to"] == []
    shared.ok("kill", owing, "--cancel")
    shared.ok("kill", plain)
