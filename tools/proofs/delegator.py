"""What alice does when a wake announces mail, in `just delegate-proof`: `delegator PATH`.

It is the command her shell tool runs (the stand-in's `--on-mail`, or a real agent's
Bash tool as the scripted model asks), so alice delegates exactly as an agent would,
with `bench` from inside her own session:

- a `task` from the operator, one `add A B` per line: each line becomes a child job
  (`bench spawn --mail - -- delegate_child`): no --name (the child gets alice.1, ...)
  and no --reply-to (the reply comes back to alice);
- a `stop-test` from the operator: one child that works until killed; alice waits
  until its screen shows it working (`bench tail CHILD --screen`), then `bench kill`s it;
- a `watch-test` from the operator: two children, one that goes silent without a
  report (`--stall-after 2s`) and one with a deadline (`--deadline 3s`);
- a reply (in the task's thread, `Re: subtask (completed)`): once both subtasks'
  replies are in her mailbox, she combines them and mails the operator `result`;
- a reply saying `outcome: interrupted`: she tells the operator who was interrupted and
  by whom (`interrupted`), or, with `reason: deadline`, that its deadline ended it
  (`deadline`);
- a stall mail (`Re: subtask (stalled: idle 2s)`, from the silent child): she tells the
  operator (`stalled`) and cancels that child.

Keys make each mail to the operator one message, however often alice is woken.
"""

import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = [sys.executable, os.path.join(HERE, "delegate_child.py")]


def bench(*args: str, stdin: str | None = None) -> str:
    p = subprocess.run(["bench", *args], input=stdin, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise SystemExit(f"bench {' '.join(args)} failed: {p.stderr.strip()}")
    return p.stdout.strip()


def parse(path: str) -> tuple[dict, str]:
    """(front matter as flat key: value pairs, body) of a mail file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, _, body = text[4:].partition("\n---\n\n")
    meta = {}
    for line in head.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            meta[key] = value.strip().strip("'\"")
    return meta, body


def header(body: str) -> tuple[dict, str]:
    """A reply's header fields (outcome, agentId, killedBy, ...) and its content."""
    _, _, rest = body.partition("---\n")
    head, _, content = rest.partition("---\n\n")
    fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    return fields, content.strip()


def spawn(task: str, *extra: str, opts: tuple[str, ...] = ()) -> str:
    out = bench(
        "spawn", "--mail", "-", "--subject", "subtask", *opts, "--", *CHILD, *extra, stdin=task
    )
    print(out)
    return out.split()[1]  # "spawned alice.1 (session ..., pid ...)"


def my_replies() -> list[tuple[dict, str]]:
    box = os.path.join(os.environ["BENCH_DIR"], "mail", os.environ["BENCH_HANDLE"])
    found = []
    for path in sorted(glob.glob(os.path.join(box, "*", "*.md"))):
        meta, body = parse(path)
        if is_reply(meta.get("subject", "")):
            found.append(header(body))
    return found


def is_stall(subject: str) -> bool:
    return "(stalled: idle " in subject


def is_reply(subject: str) -> bool:
    """A job's reply, in its task's thread: `Re: subtask (<outcome>)`."""
    return subject.startswith("Re: ") and not is_stall(subject)


def main(path: str) -> int:
    meta, body = parse(path)
    subject = meta.get("subject", "")
    if subject == "task":
        for line in body.strip().splitlines():
            spawn(line)
    elif subject == "stop-test":
        child = spawn("add 0 0", "--hang")
        deadline = time.monotonic() + 60
        while "working" not in bench("tail", child, "--screen"):
            if time.monotonic() > deadline:
                raise SystemExit(f"{child} never showed it was working")
            time.sleep(0.1)
        print(bench("kill", child))
    elif subject == "watch-test":
        spawn("add 1 1", "--stall", opts=("--stall-after", "2s"))
        spawn("add 2 2", "--hang", opts=("--deadline", "3s", "--stall-after", "0s"))
    elif is_stall(subject):
        who = meta.get("from", "")
        bench(
            "mail", "send", "operator", "-s", "stalled", "--key", f"stalled-{who}",
            "-m", f"{who}: stalled, no output and no report",
        )  # fmt: skip
        print(bench("kill", "--cancel", who))
        print(f"told the operator that {who} stalled, and cancelled it")
    elif is_reply(subject):
        fields, _ = header(body)
        if fields.get("reason") == "deadline":
            who = fields.get("agentId")
            bench(
                "mail", "send", "operator", "-s", "deadline", "--key", f"deadline-{who}",
                "-m", f"{who}: outcome interrupted, reason deadline",
            )  # fmt: skip
            print(f"told the operator that {who} met its deadline")
            return 0
        if fields.get("outcome") == "interrupted":
            who, by = fields.get("agentId"), fields.get("killedBy", "nobody")
            bench(
                "mail", "send", "operator", "-s", "interrupted", "--key", f"interrupted-{who}",
                "-m", f"{who}: outcome interrupted, killedBy {by}",
            )  # fmt: skip
            print(f"told the operator that {who} was interrupted by {by}")
            return 0
        done = [c for f, c in my_replies() if f.get("outcome") == "completed"]
        if len(done) < 2:
            print(f"{len(done)} of 2 subtasks done")
            return 0
        total = sum(int(c.rsplit("=", 1)[1]) for c in done)
        result = "\n".join([*done, f"total {total}"])
        bench("mail", "send", "operator", "-s", "result", "--key", "result", "-m", result)
        print(f"sent the result to the operator: total {total}")
    else:
        print(f"nothing to do for {subject!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
