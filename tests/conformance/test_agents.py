"""Agents that report for themselves: a session spawned with `--agent claude` gets hooks
calling `bench hook EVENT`, its state comes from its reports, mail reaches it through its
Stop hook, approvals are answered through its PermissionRequest hook, a usage limit parks
its wakes. The agent is the hooked stand-in (tests/standin/hooked.py), named `claude` so
the claude adapter applies; tests/proofs/test_real_agents.py runs the real Claude Code."""

import json
import os
import sys

from tests.conftest import assert_refused
from tests.support.spawn import program_named, records

HOOKED = os.path.join(os.path.dirname(__file__), "..", "standin", "hooked.py")


def hooked(daemon, name: str, *extra: str) -> tuple[dict, str]:
    """Spawn the hooked stand-in as `claude` with the claude adapter; wait for its start."""
    claude = program_named(daemon, "claude", sys.executable, os.path.abspath(HOOKED))
    rec = os.path.join(daemon.scratch, f"{name}.rec")
    s = daemon.ok(
        "spawn", "--name", name, "--agent", "claude", *extra, "--", claude, "--record", rec
    )
    daemon.wait_event(
        "agent/state", lambda e: e["session"] == s["session"] and e["state"] == "idle"
    )
    return s, rec


def agent_of(daemon, name: str) -> dict:
    (row,) = [r for r in daemon.ok("ps")["sessions"] if r["handle"] == name]
    return row["agent"]


def test_reports_give_the_state_in_ps(daemon):
    s, rec = hooked(daemon, "hk")
    a = agent_of(daemon, "hk")
    assert a["adapter"] == "claude" and a["state"] == "idle" and a["source"] == "report"
    assert "AGENT" in daemon.bench("ps").out
    # The hooks were given on the command line only; ps shows the command as given.
    (row,) = [r for r in daemon.ok("ps")["sessions"] if r["handle"] == "hk"]
    assert "--settings" not in row["argv"]
    # Through the compiled client when `./run` built it beside `bench`, else `bench hook`.
    with open(rec + ".hooks") as f:
        stop = json.load(f)["Stop"]
    compiled = os.path.join(os.path.dirname(sys.executable), "bench-hook")
    fallback = os.path.join(os.path.dirname(sys.executable), "bench") + " hook"
    want = compiled if os.access(compiled, os.X_OK) else fallback
    assert stop.startswith(want) and stop.endswith(" stop"), stop
    status = daemon.bench("status").out
    assert "agents    1 with adapters: 1 idle" in status, status
    assert daemon.ok("status")["agents"]["hk"]["state"] == "idle"


def test_idle_agent_is_typed_to_mail_mid_turn_goes_through_its_stop_hook(shared, who):
    s, rec = hooked(shared, who)
    first = shared.ok("mail", "send", who, "-m", "one")  # idle: typed
    shared.wait_until(lambda: len(records(rec)) >= 1, what="the typed wake")
    assert records(rec)[0]["door"] == "typed"
    assert records(rec)[0]["line"].startswith("You have mail from operator: ")
    shared.wait_event(
        "agent/state",
        lambda e: e["handle"] == who and e["state"] == "idle",
        since=shared.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"])["seq"],
    )
    shared.ok("type", who, "work 3")
    shared.wait_event(
        "agent/state",
        lambda e: e["handle"] == who and e["state"] == "working",
        since=shared.last_seq() - 5,
    )
    sent = shared.ok("mail", "send", who, "-m", "two")  # mid-turn: waits for its Stop
    woken = shared.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "stop-hook"
    got = shared.wait_until(
        lambda: [
            r for r in records(rec) if r["line"].startswith("You have mail") and r["door"] == "stop"
        ],
        what="the wake handed over by the Stop hook",
    )
    assert woken["path"] in got[0]["line"]
    # Nothing typed for it: the only typed wake is the first one.
    typed = [r for r in records(rec) if r["door"] == "typed" and "You have mail" in r["line"]]
    assert len(typed) == 1
    status = shared.ok("mail", "status", sent["mail_id"])
    assert {"woken", "active"} <= {s["state"] for s in status["states"]}


def test_approve_and_deny_through_the_permission_hook(shared, who):
    s, rec = hooked(shared, who)
    shared.ok("type", who, "tool rm -rf /tmp/x\x1b[31m")
    blocked = shared.wait_event(
        "agent/state", lambda e: e["handle"] == who and e["state"] == "blocked"
    )
    assert blocked["tool"] == "Bash" and "rm -rf /tmp/x" in blocked["input"]
    a = agent_of(shared, who)
    assert a["state"] == "blocked" and a["tool"] == "Bash"
    ps = shared.bench("ps").out
    assert f"{who} waits for approval: Bash" in ps and "\x1b" not in ps  # escaped
    # Mail to a blocked agent waits, and its sender sees why.
    sent = shared.ok("mail", "send", who, "-m", "later")
    shared.wait_event(
        "wake/deferred", lambda e: e["mail_id"] == sent["mail_id"] and e["reason"] == "blocked"
    )
    assert "reason blocked" in shared.bench("mail", "status", sent["mail_id"]).out
    ok = shared.ok("approve", who)
    assert ok["tool"] == "Bash" and ok["via"] == "hook"
    shared.wait_until(lambda: "allowed" in shared.bench("tail", who).out, what="allowed on screen")
    ans = shared.wait_event("agent/answered", lambda e: e["handle"] == who)
    assert ans["allow"] is True and ans["by"] == "operator"
    # The parked mail goes in once it is idle again (or at its turn's end).
    shared.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    # Nothing waits now: approve again is refused.
    assert_refused(shared.bench("approve", who, "--json"), "not-blocked")
    seq = shared.last_seq()
    shared.ok("type", who, "tool curl evil")
    shared.wait_event(
        "agent/state", lambda e: e["handle"] == who and e["state"] == "blocked", since=seq
    )
    shared.ok("deny", who, "-m", "no network")
    shared.wait_until(
        lambda: "denied: no network" in shared.bench("tail", who).out, what="denied on screen"
    )


def test_limited_agent_parks_its_wakes_until_it_works_again(shared, who):
    s, rec = hooked(shared, who)
    shared.ok("type", who, "limit")
    shared.wait_event("agent/state", lambda e: e["handle"] == who and e["state"] == "limited")
    # The stand-in's limit message says when it resets; bench reads it off the screen
    # (evidence, marked so) right after the report.
    lim = shared.wait_event(
        "agent/state",
        lambda e: e["handle"] == who and e["state"] == "limited" and e["until"] is not None,
    )
    a = agent_of(shared, who)
    assert a["state"] == "limited" and a["screen"] == "limit"
    sent = shared.ok("mail", "send", who, "-m", "parked")
    d = shared.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"])
    assert d["reason"] == "parked"
    status = shared.ok("mail", "status", sent["mail_id"])
    (parked,) = [m for m in status["states"] if m.get("reason") == "parked"]
    assert parked["until"] is not None  # the sender sees until when: the agent's reset
    assert "reason parked, until " in shared.bench("mail", "status", sent["mail_id"]).out
    assert lim["until"] is not None
    assert not [r for r in records(rec) if "You have mail" in r["line"]]
    # It reports work again (a prompt): its turn's end hands the parked mail over, once.
    shared.ok("type", who, "hello")
    woken = shared.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "stop-hook"
    shared.wait_until(lambda: [r for r in records(rec) if "You have mail" in r["line"]])
    assert len([r for r in records(rec) if "You have mail" in r["line"]]) == 1


def test_report_from_the_operator_is_refused_and_exit_is_reported(shared, who, tmp_path):
    r = shared.bench("hook", "stop", input="{}")
    assert r.rc == 1 and "only a session" in r.err  # never exit 2: an agent reads it as "block"
    # A program without an adapter may report by itself: about itself only.
    from tests.conformance.test_delegation import Shell

    sh = Shell(shared, tmp_path, who + "s")
    rc, _out, err = sh.run("echo '{}' | bench hook prompt")
    assert rc == 0, err
    a = agent_of(shared, who + "s")
    assert a["adapter"] == "self" and a["state"] == "working"
    s, _ = hooked(shared, who)
    shared.ok("type", who, "\x04", "--no-enter")
    shared.wait_event("agent/state", lambda e: e["handle"] == who and e["state"] == "exited")


def test_a_jobs_approval_is_mailed_to_its_parent_who_may_answer_it(shared, who, tmp_path):
    warmup, kid, alice_ = who + "w", who + "k", who + "a"
    from tests.conformance.test_delegation import Shell, task

    hooked(shared, warmup)  # writes the `claude` script; its own session is not used
    claude = os.path.join(shared.scratch, "bin", "claude")
    rec = os.path.join(shared.scratch, f"{kid}.rec")
    alice = Shell(shared, tmp_path, alice_)
    alice.ok(
        f"bench spawn --json --mail {task(tmp_path)} --name {kid} --agent claude -- "
        f"{claude} --record {rec}"
    )
    shared.wait_event("agent/state", lambda e: e["handle"] == kid and e["state"] == "idle")
    shared.ok("type", kid, "tool make deploy")
    shared.wait_event("agent/state", lambda e: e["handle"] == kid and e["state"] == "blocked")
    # One mail to the parent, with the tool and its input.
    got = shared.wait_until(
        lambda: [
            x
            for x in shared.ok("mail", "list", "--handle", alice_, "--state", "all")["messages"]
            if x["from"] == kid and "approval" in (x.get("subject") or "")
        ],
        what="the approval mail to the parent",
    )
    assert len(got) == 1 and "Bash" in got[0]["subject"]
    body = shared.ok("mail", "read", "--handle", alice_, got[0]["mail_id"])["body"]
    assert "make deploy" in body and f"bench approve {kid}" in body
    # The parent answers it (its own descendant); the kid's agent runs the tool.
    a = alice.ok(f"bench approve --json {kid}")
    assert a["handle"] == kid and a["via"] == "hook"
    shared.wait_until(lambda: "allowed" in shared.bench("tail", kid).out, what="allowed")
    ans = shared.wait_event("agent/answered", lambda e: e["handle"] == kid)
    assert ans["by"] == alice_ and ans["allow"] is True
    # A usage limit: one mail to the parent, with its reset time (read off the screen).
    shared.ok("type", kid, "limit")
    shared.wait_event("agent/state", lambda e: e["handle"] == kid and e["state"] == "limited")
    limited = shared.wait_until(
        lambda: [
            x
            for x in shared.ok("mail", "list", "--handle", alice_, "--state", "all")["messages"]
            if x["from"] == kid and "usage limit" in (x.get("subject") or "")
        ],
        60,
        "the limit mail to the parent",
    )
    body = shared.ok("mail", "read", "--handle", alice_, limited[0]["mail_id"])["body"]
    assert "23:59 UTC" in body
    # Killed without its `end` report: ps says exited all the same.
    shared.ok("kill", kid)
    shared.wait_until(
        lambda: [
            r
            for r in shared.ok("ps", "-a")["sessions"]
            if r["handle"] == kid and (r.get("agent") or {}).get("state") == "exited"
        ],
        what="kid's agent exited",
    )


def test_reports_are_rate_bounded_per_session(make_daemon, tmp_path):
    from tests.conformance.test_delegation import Shell

    d = make_daemon("--agent-reports", "1")  # a burst of 10, one a second
    sh = Shell(d, tmp_path, "chatty")
    rc, out, err = sh.run(
        "n=0; for i in $(seq 16); do bench hook prompt </dev/null || n=$((n+1)); done; echo $n"
    )
    assert rc == 0 and int(out.strip()) >= 3, (out, err)
    assert "--agent-reports" in err  # each refusal says why, on stderr
    hit = d.wait_event("agent/report-limited", lambda e: e["handle"] == "chatty")
    assert hit["limit"] == 1
    assert len(d.events(0, "agent/report-limited")) == 1  # one line per flood (--flood-interval)


def hooked_codex(daemon, name: str) -> tuple[dict, str]:
    """The hooked stand-in as `codex` with the codex adapter (its `-c` hook options); it
    runs SessionStart only at its first prompt, so this waits for its ready footer."""
    codex = program_named(daemon, "codex", sys.executable, os.path.abspath(HOOKED))
    rec = os.path.join(daemon.scratch, f"{name}.rec")
    s = daemon.ok("spawn", "--name", name, "--agent", "codex", "--", codex, "--record", rec)
    daemon.wait_until(
        lambda: "for agents · ? for shortcuts" in daemon.bench("tail", name, "--screen").out,
        what="the codex stand-in's footer",
    )
    return s, rec


def test_codex_adapter_reports_and_mail_mid_turn_goes_through_its_stop_hook(daemon):
    s, rec = hooked_codex(daemon, "cx")
    assert agent_of(daemon, "cx") == {"adapter": "codex"}  # no report before its first prompt
    first = daemon.ok("mail", "send", "cx", "-m", "one")  # typed by the screen
    daemon.wait_until(lambda: len(records(rec)) >= 1, what="the typed wake")
    assert records(rec)[0]["door"] == "typed"
    daemon.wait_event("agent/woken", lambda e: e["mail_id"] == first["mail_id"])
    daemon.wait_until(lambda: agent_of(daemon, "cx").get("state") == "idle", what="idle")
    assert agent_of(daemon, "cx")["source"] == "report"
    seq = daemon.last_seq()
    daemon.ok("type", "cx", "work 3")
    daemon.wait_event(
        "agent/state", lambda e: e["handle"] == "cx" and e["state"] == "working", since=seq
    )
    sent = daemon.ok("mail", "send", "cx", "-m", "two")
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "stop-hook"
    daemon.wait_until(lambda: records(rec)[-1]["door"] == "stop", what="handed over")


def test_codex_turn_ended_without_a_report_is_read_off_its_screen(daemon):
    s, rec = hooked_codex(daemon, "cx")
    daemon.ok("type", "cx", "hello")  # its session starts at its first prompt
    daemon.wait_until(lambda: agent_of(daemon, "cx").get("state") == "idle", what="idle")
    # An error ends the turn with no hook: idle, by the screen.
    seq = daemon.last_seq()
    daemon.ok("type", "cx", "fail")
    daemon.wait_event(
        "agent/state", lambda e: e["handle"] == "cx" and e["state"] == "working", since=seq
    )
    idle = daemon.wait_event(
        "agent/state", lambda e: e["handle"] == "cx" and e["state"] == "idle", since=seq
    )
    assert idle["source"] == "screen"
    # Its usage limit, likewise: limited until the time it shows, the wakes parked.
    seq = daemon.last_seq()
    daemon.ok("type", "cx", "limit")
    lim = daemon.wait_event(
        "agent/state", lambda e: e["handle"] == "cx" and e["state"] == "limited", since=seq
    )
    assert lim["source"] == "screen" and lim["until"] is not None
    assert agent_of(daemon, "cx")["screen"] == "limit"
    sent = daemon.ok("mail", "send", "cx", "-m", "parked")
    d = daemon.wait_event("wake/deferred", lambda e: e["mail_id"] == sent["mail_id"])
    assert d["reason"] == "parked" and d["until"] is not None
    # It reports work again (a prompt): its turn's end hands the parked mail over, once.
    daemon.ok("type", "cx", "hello")
    woken = daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert woken["door"] == "stop-hook"
    daemon.wait_until(lambda: [r for r in records(rec) if "You have mail" in r["line"]])
    assert len([r for r in records(rec) if "You have mail" in r["line"]]) == 1
