"""skills/mail/SKILL.md is executed: every bash fence runs, in order, inside a session.

The session is a job (spawned with task mail and --reply-to operator), as the skill's
last section describes, so `bench report` works. The idle gate is long enough that no
wake lands while the fences run, so the run is deterministic. Then we check that the
sequence did what the text says.
"""

import os
import re
from pathlib import Path

import yaml

from tests.conftest import ROOT

SKILL = os.path.join(ROOT, "skills", "mail", "SKILL.md")
DELEGATION = "Delegating: jobs of your own"


def fences(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", text, flags=re.M | re.S)


def test_front_matter_is_a_claude_code_skill():
    text = Path(SKILL).read_text()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["name"] == "bench-mail"
    assert len(meta["description"]) > 40


def test_every_fence_runs_and_does_what_the_text_says(make_daemon, tmp_path):
    d = make_daemon("--idle-gate", "60")
    # The delegation section's fences start jobs whose replies arrive later: they run
    # in their own test below (test_the_delegation_section_runs_as_it_says).
    text = Path(SKILL).read_text()
    blocks = fences(text.replace(section(text, DELEGATION), ""))
    assert len(blocks) >= 6
    script = ["set -u"]
    for i, block in enumerate(blocks):
        out = tmp_path / f"fence{i}.out"
        script.append(f"( set -e\n{block}) > {out} 2>&1 || {{ echo FENCE-{i}-FAILED; exit 1; }}")
    script.append("echo SKILL-DONE")
    runner = tmp_path / "skill.sh"
    runner.write_text("\n".join(script) + "\n")
    task = tmp_path / "task.md"
    task.write_text("Fix the flaky test.\n")
    s = d.ok(
        "spawn",
        "--name",
        "skiller",
        "--mail",
        str(task),
        "--reply-to",
        "operator",
        "--",
        "bash",
        str(runner),
    )
    exited = d.wait_event("session/exited", lambda e: e["session"] == s["session"], 60)
    outs = [(tmp_path / f"fence{i}.out").read_text() for i in range(len(blocks))]
    assert exited["exit"] == 0, "\n---\n".join(outs)

    by_text = dict(zip(blocks, outs, strict=True))

    def output_of(snippet: str) -> str:
        return next(o for b, o in by_text.items() if snippet in b)

    # Your address is BENCH_HANDLE.
    assert output_of('echo "I am $BENCH_HANDLE"').strip() == "I am skiller"
    # No wake landed (idle gate 60 s), so the oldest unread is the task; reading retired it.
    first_read = output_of("bench mail read\n")
    assert "Fix the flaky test." in first_read and "/read/" in first_read
    # The send answered with the id and the file.
    sent = output_of("note to self")
    assert "sent " in sent and "/mail/skiller/inbox/" in sent
    # The keyed resend wrote nothing new.
    keyed = output_of("--key status-1")
    assert "already sent as" in keyed
    statuses = d.ok("mail", "list", "--handle", "operator", "--state", "all")["messages"]
    assert sum(m["subject"] == "status" for m in statuses) == 1
    # Listing is metadata: the subject shows, the body does not; read retires.
    listing = output_of("bench mail list --state read")
    assert "note to self" in listing and "The flaky test is test_io." in listing
    head, _, after_list = listing.partition("note to self")
    assert "The flaky test is test_io." not in head
    # Search finds both messages about the flaky test, with snippets.
    found = output_of("bench mail search flaky")
    assert "Fix the [flaky] test." in found and "The [flaky] test is test_io." in found
    # The reply went to the task's sender (the operator) and the thread shows both.
    thread = output_of("bench mail reply")
    assert "sent " in thread and "/mail/operator/inbox/" in thread
    assert thread.index("Fix the flaky test.") < thread.index("On it: looking at the flaky")
    replies = [
        m
        for m in d.ok("mail", "list", "--handle", "operator")["messages"]
        # (the job's own reply, in the same thread, says its outcome: not this one)
        if m["subject"].startswith("Re:") and not m["subject"].endswith("(completed)")
    ]
    assert len(replies) == 1 and replies[0]["from"] == "skiller"
    # Files are the record: both messages are in read/, the inbox is empty.
    box = os.path.join(d.dir, "mail", "skiller")
    assert len(os.listdir(os.path.join(box, "read"))) == 2
    assert os.listdir(os.path.join(box, "inbox")) == []
    assert "from:" in output_of("head -n 8")
    # The sender sees its mail's states; a wait with nothing coming ends at its timeout.
    states = output_of("bench mail status")
    assert "delivered" in states and "state:" in states
    assert "(exit 6)" in output_of("bench mail wait --from operator")
    # The reply owed by the job: the header, then the reported content.
    reply = d.wait_until(
        lambda: [
            m
            for m in d.ok("mail", "list", "--handle", "operator")["messages"]
            if m["from"] == "skiller" and m["subject"].endswith("(completed)")
        ],
        30,
        "the job's reply",
    )
    body = d.ok("mail", "read", reply[0]["mail_id"], "--handle", "operator")["body"]
    assert body == (
        "---\noutcome: completed\nagentId: skiller\n"
        f"sessionId: {s['session']}\nended: exited\nexitCode: 0\n---\n\n"
        "Fixed the flaky test: test_io now waits for the socket."
    )


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_a_woken_job_finds_its_task_as_the_skill_says(make_daemon, tmp_path):
    """A real job, woken by its task mail, follows the Jobs section: `cat` the path the
    wake line names; `bench mail read` answers no-unread (the wake retired the task);
    the section's fence lists the task; `bench report` is what the reply carries."""
    d = make_daemon()  # the suite's fast idle gate: the wake lands at once
    jobs = section(Path(SKILL).read_text(), "Jobs and the reply you owe")
    fence = fences(jobs)[0]
    assert "no-unread" in jobs and "cat <path>" in jobs
    out = tmp_path / "job.out"
    runner = tmp_path / "job.sh"
    runner.write_text(
        "printf 'waiting> '\n"
        "IFS= read -r line\n"  # the wake line, typed by the reactor
        f"exec > {out} 2>&1\n"
        'echo "WAKE: $line"\n'
        'path="${line##*: }"\n'
        'cat "$path"\n'
        'echo READ-BEGIN; bench mail read; echo "READ-END rc=$?"\n'
        f"echo LIST-BEGIN\n{fence}echo LIST-END\n"
        'bench report "task was: $(tail -n 1 "$path")"\n'
    )
    task = tmp_path / "task.md"
    task.write_text("Count the flaky tests.\n")
    s = d.ok(
        "spawn",
        "--name",
        "woken",
        "--mail",
        str(task),
        "--subject",
        "the task",
        "--reply-to",
        "operator",
        "--",
        "bash",
        str(runner),
    )
    woken = d.wait_event("agent/woken", lambda e: e["handle"] == "woken", 60)
    exited = d.wait_event("session/exited", lambda e: e["session"] == s["session"], 60)
    got = out.read_text()
    assert exited["exit"] == 0, got
    assert f"WAKE: You have mail from operator: {woken['path']}" in got, got
    assert "/mail/woken/read/" in woken["path"]
    assert "Count the flaky tests." in got
    read_part = got.split("READ-BEGIN", 1)[1].split("READ-END", 1)[0]
    assert "[no-unread]" in read_part and "READ-END rc=1" in got, got
    listed = got.split("LIST-BEGIN", 1)[1].split("LIST-END", 1)[0]
    assert "the task" in listed and "read" in listed, listed
    reply = d.wait_until(
        lambda: [
            m
            for m in d.ok("mail", "list", "--handle", "operator")["messages"]
            if m["from"] == "woken" and m["subject"].endswith("(completed)")
        ],
        30,
        "the job's reply",
    )
    body = d.ok("mail", "read", reply[0]["mail_id"], "--handle", "operator")["body"]
    assert body.endswith("\n---\n\ntask was: Count the flaky tests."), body
    assert "outcome: completed" in body


def test_the_delegation_section_runs_as_it_says(make_daemon, tmp_path):
    """The Delegation section's fences, in order, inside a real session: the first child gets `<you>.1`, reports, and its one reply wakes
    the spawner; the cancelled one sends nothing; ps --tree shows the child under it."""
    d = make_daemon()  # the suite's fast idle gate: the reply's wake lands at once
    text = section(Path(SKILL).read_text(), DELEGATION)
    for code in ("handle-taken", "too-many-children", "too-deep", "rate-limited"):
        assert code in text
    first, second = fences(text)
    out = tmp_path / "deleg.out"
    runner = tmp_path / "deleg.sh"
    runner.write_text(
        f"exec 3>&1 > {out} 2>&1\n"
        "set -e\n"
        f"{first}"
        f"{second}"
        "set +e\n"
        "printf 'waiting> ' >&3\n"
        "IFS= read -r line\n"  # the wake line for the reply, typed by the reactor
        'echo "WAKE: $line"\n'
        'cat "${line##*: }"\n'
        "echo; echo DELEGATION-DONE\n"
    )
    s = d.ok("spawn", "--name", "lead", "--", "bash", str(runner))
    exited = d.wait_event("session/exited", lambda e: e["session"] == s["session"], 60)
    got = out.read_text()
    assert exited["exit"] == 0 and "DELEGATION-DONE" in got, got
    delegated = [e for e in d.events(kind="job/delegated")]
    assert [e["child_handle"] for e in delegated] == ["lead.1", "lead-slow"]
    assert all(e["parent_handle"] == "lead" and e["reply_to"] == ["lead"] for e in delegated)
    # The first fence's answer names the derived handle; ps --tree shows it under lead.
    assert "spawned lead.1" in got
    tree = got.split("HANDLE", 1)[1]
    assert "\nlead " in tree and "└─ lead.1" in tree.split("spawned lead-slow")[0], got
    # Exactly one reply, from lead.1, carrying what it reported; the cancel sent none.
    assert "WAKE: You have mail from lead.1: " in got, got
    assert "outcome: completed" in got and "agentId: lead.1" in got
    assert got.rstrip().endswith("12 tests\nDELEGATION-DONE"), got
    settled = {e["handle"]: e for e in d.events(kind="job/settled")}
    assert settled["lead-slow"]["outcome"] == "cancelled" and settled["lead-slow"]["replies"] == 0
    box = os.path.join(d.dir, "mail", "lead")
    files = [f for sub in ("inbox", "read") for f in os.listdir(os.path.join(box, sub))]
    assert len(files) == 1, files  # the one reply
