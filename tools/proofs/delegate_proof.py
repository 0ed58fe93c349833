"""`just delegate-proof`: an agent delegates from inside its own session, within limits,
and is owed exactly one reply per child.

The operator spawns alice (the stand-in TUI agent of the tests; `--real` a real Claude
Code or Codex against the scripted local model server) and mails her a `task` of two
subtasks. Woken, alice runs `bench spawn --mail - -- CHILD` once per subtask from her
own shell: two jobs, alice.1 and alice.2, each owing her its reply. Each child reads its
task, reports the answer and exits; alice, woken by each reply, combines the two and
mails the operator `result`. Then the operator mails her a `stop-test`: she starts
alice.3, waits until it is working, and kills it; the reply says `outcome: interrupted`
and `killedBy: alice`, and she tells the operator so. Last, a `watch-test`: she starts
alice.4, which goes silent without a report (`--stall-after 2s`), and alice.5, which
works past its `--deadline 3s`. The daemon mails her that alice.4 stalled (its last
screen lines, in the task's thread); she tells the operator and cancels it. alice.5 is
ended at its deadline and its reply says `outcome: interrupted`, `reason: deadline`;
she tells the operator that too. The proof checks every mail and prints the event
trail; it exits non-zero, with the reason, on any deviation.
"""

import argparse
import glob
import os
import sys
import time

import yaml

from tools.proofs.common import (
    ProofFailed,
    TempDaemon,
    mail_states,
    states_text,
    timeline,
    wait_for,
)

HERE = os.path.dirname(os.path.abspath(__file__))
DELEGATOR = [sys.executable, os.path.join(HERE, "delegator.py")]
TASK = "add 19 23\nadd 100 7\n"
TRAIL = {
    "session/spawned",
    "job/delegated",
    "mail/sent",
    "agent/woken",
    "job/reported",
    "session/exited",
    "job/settled",
    "outbox/posted",
    "job/deadline",
    "job/stalled",
    "job/active",
}


def spawn_standin(bench) -> dict:
    from tests.support.spawn import STANDIN

    cmd = " ".join(DELEGATOR)
    return bench.run(
        "spawn", "--name", "alice", "--ready", "standin>", "--",
        sys.executable, STANDIN, "--on-mail", cmd,
    )  # fmt: skip


def mails(bench_dir: str, handle: str) -> list[tuple[dict, str]]:
    """Every message in a mailbox, from its files: (front matter, body), in id order."""
    out = []
    paths = glob.glob(os.path.join(bench_dir, "mail", handle, "*", "*.md"))
    for path in sorted(paths, key=os.path.basename):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        head, _, body = text[4:].partition("\n---\n\n")
        out.append((yaml.safe_load(head), body))
    return out


def reply_fields(body: str) -> dict:
    return yaml.safe_load(body.split("---\n")[1])


def operator_mail(bench, subject: str, timeout: float) -> dict:
    def found():
        for x in bench.run("mail", "list", "--handle", "operator")["messages"]:
            if x["subject"] == subject:
                return x
        return None

    meta = wait_for(found, timeout, f"alice's {subject!r} mail to the operator")
    return bench.run("mail", "read", meta["mail_id"], "--handle", "operator")


def replies_to_alice(bench) -> list[tuple[dict, dict]]:
    return [
        (meta, reply_fields(body))
        for meta, body in mails(bench.dir, "alice")
        if str(meta.get("subject", "")).startswith("Re: ") and "(stalled: " not in meta["subject"]
    ]


def run(real: str | None, timeout: float, keep: bool, gate: str) -> int:
    agent = None
    if real:
        from tools.proofs.real_delegate import RealAlice

        agent = RealAlice(real, DELEGATOR)
    try:
        # Alice is woken about ten times in a minute: more than the default wake bucket
        # (6), whose refill (a minute a token) would hold her last wakes back.
        with TempDaemon("--idle-gate", gate, "--wake-burst", "16", keep=keep) as bench:
            print(f"BENCH_DIR {bench.dir}")
            try:
                s = spawn_standin(bench) if agent is None else agent.spawn(bench)
                print(f"spawned alice  session {s['session']} pid {s['pid']}")
                t0 = time.monotonic()
                bench.run("mail", "send", "alice", "-s", "task", "-m", TASK)
                print("mailed  alice a task of two subtasks")
                got = operator_mail(bench, "result", timeout)
                body = got["body"].strip()
                print(f"collected {body!r} from {got['from']} after {time.monotonic() - t0:.2f}s")
                # The two answers in the order their replies came, then the total.
                lines = body.splitlines()
                want = {"19 + 23 = 42", "100 + 7 = 107"}
                if got["from"] != "alice" or set(lines[:2]) != want or lines[2:] != ["total 149"]:
                    raise ProofFailed(f"the result was {body!r} from {got['from']}")
                check_replies(bench, 2)
                bench.run("mail", "send", "alice", "-s", "stop-test", "-m", "start one, stop it")
                print("mailed  alice a stop-test")
                got = operator_mail(bench, "interrupted", timeout)
                body = got["body"].strip()
                print(f"collected {body!r} from {got['from']}")
                if body != "alice.3: outcome interrupted, killedBy alice":
                    raise ProofFailed(f"the interrupted report was {body!r}")
                check_replies(bench, 3)
                bench.run(
                    "mail", "send", "alice", "-s", "watch-test", "-m", "one stalls, one is late"
                )
                print("mailed  alice a watch-test")
                got = operator_mail(bench, "stalled", timeout)
                body = got["body"].strip()
                print(f"collected {body!r} from {got['from']}")
                if body != "alice.4: stalled, no output and no report":
                    raise ProofFailed(f"the stall report was {body!r}")
                got = operator_mail(bench, "deadline", timeout)
                body = got["body"].strip()
                print(f"collected {body!r} from {got['from']}")
                if body != "alice.5: outcome interrupted, reason deadline":
                    raise ProofFailed(f"the deadline report was {body!r}")
                check_stall_mail(bench)
                wait_for(
                    lambda: any(
                        e["kind"] == "job/settled" and e["handle"] == "alice.4"
                        for e in bench.events()
                    ),
                    timeout,
                    "alice.4 cancelled",
                )
                check_replies(bench, 4)
                events = bench.events()
                check_trail(events)
                print("\nevent trail:")
                print(timeline(events, TRAIL))
                print("\ndelivery states (bench mail status, as the operator sees them):")
                shown = [e for e in events if e["kind"] in TRAIL]
                print(states_text(mail_states(bench, trail_mail(events)), shown[0]["ts"]))
                if agent is not None:
                    agent.print_screen(bench)
                print(
                    "\ndelegate-proof: ok: alice delegated two subtasks from her own session, "
                    "got exactly one completed reply per child, combined them, and was told "
                    "outcome interrupted, killedBy alice for the child she killed; she was "
                    "mailed that alice.4 stalled and that alice.5 met its deadline, and told "
                    "the operator both"
                )
                return 0
            except ProofFailed:
                try:
                    print("\nevent trail so far:")
                    print(timeline(bench.events(), TRAIL))
                    if agent is not None:
                        agent.print_screen(bench)
                except ProofFailed:
                    pass
                raise
    finally:
        if agent is not None:
            agent.close()


def trail_mail(events: list[dict]) -> list[str]:
    """The ids of the messages in the trail, in order: the tasks, reports and the jobs'
    replies (sent, or posted from a job's outbox), each once."""
    ids: list[str] = []
    for e in events:
        if e["kind"] in ("mail/sent", "outbox/posted") and e["mail_id"] not in ids:
            ids.append(e["mail_id"])
    return ids


def check_stall_mail(bench) -> None:
    """One stall mail from alice.4 to alice, in its task's thread, quoting its screen."""
    stalls = [
        (meta, body)
        for meta, body in mails(bench.dir, "alice")
        if "(stalled: idle " in str(meta.get("subject", ""))
    ]
    if len(stalls) != 1:
        raise ProofFailed(f"alice holds {len(stalls)} stall mails, not 1")
    meta, body = stalls[0]
    if meta["from"] != "alice.4" or not meta.get("in-reply-to"):
        raise ProofFailed(f"the stall mail was from {meta['from']}, in reply to nothing")
    if "working, and soon silent" not in body:
        raise ProofFailed(f"the stall mail does not quote alice.4's screen: {body!r}")
    print(f"alice holds 1 stall mail from alice.4: {meta['subject']!r}")


def check_replies(bench, n: int) -> None:
    """Alice holds exactly n replies: alice.1 and alice.2 completed, alice.3 interrupted
    (killed by alice), alice.5 interrupted (its deadline), one each; alice.4, cancelled,
    owes none."""
    got = replies_to_alice(bench)
    by = sorted((f["agentId"], f["outcome"], f.get("killedBy") or f.get("reason")) for _m, f in got)
    want = [("alice.1", "completed", None), ("alice.2", "completed", None)]
    want += [("alice.3", "interrupted", "alice")] if n >= 3 else []
    want += [("alice.5", "interrupted", "deadline")] if n >= 4 else []
    if by != want:
        raise ProofFailed(f"alice's replies were {by}, not {want}")
    for meta, fields in got:
        if meta["from"] != fields["agentId"]:
            raise ProofFailed(f"a reply from {meta['from']} names {fields['agentId']}")
    print(f"alice holds {n} replies, one per child: {', '.join(f'{a} {o}' for a, o, _ in by)}")


def check_trail(events: list[dict]) -> None:
    delegated = [e for e in events if e["kind"] == "job/delegated"]
    kids = [(e["parent_handle"], e["child_handle"], e["reply_to"]) for e in delegated]
    want = [("alice", f"alice.{i}", ["alice"]) for i in (1, 2, 3, 4, 5)]
    if kids != want:
        raise ProofFailed(f"job/delegated events were {kids}, not {want}")
    tasks = [
        e
        for e in events
        if e["kind"] == "mail/sent" and e["to"] in {f"alice.{i}" for i in range(1, 6)}
    ]
    if [e["from"] for e in tasks] != ["alice"] * 5:
        raise ProofFailed("a child's task mail was not from alice")
    settled = {e["handle"]: e["outcome"] for e in events if e["kind"] == "job/settled"}
    want_settled = {
        "alice.1": "completed",
        "alice.2": "completed",
        "alice.3": "interrupted",
        "alice.4": "cancelled",
        "alice.5": "interrupted",
    }
    if settled != want_settled:
        raise ProofFailed(f"the jobs settled as {settled}, not {want_settled}")
    posted = [e["to"] for e in events if e["kind"] == "outbox/posted"]
    if posted != ["alice"] * 4:
        raise ProofFailed(f"replies were posted to {posted}, not alice four times")
    deadline = [e["handle"] for e in events if e["kind"] == "job/deadline"]
    stalled = [(e["handle"], e["mailed"]) for e in events if e["kind"] == "job/stalled"]
    if deadline != ["alice.5"] or stalled != [("alice.4", ["alice"])]:
        raise ProofFailed(f"job/deadline for {deadline}, job/stalled {stalled}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="delegate-proof", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--real",
        nargs="?",
        const="claude",
        choices=["claude", "codex"],
        help="alice is a real Claude Code (default) or Codex against the local model server",
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds for each step")
    p.add_argument("--keep", action="store_true", help="keep the temporary BENCH_DIR")
    args = p.parse_args(argv)
    timeout = args.timeout or (240.0 if args.real else 60.0)
    gate = "1.0" if args.real else "0.5"
    try:
        return run(args.real, timeout, args.keep, gate)
    except ProofFailed as err:
        print(f"\ndelegate-proof: FAILED: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ndelegate-proof: interrupted; cleaned up", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
