"""A stand-in for an agent with hooks (as Claude Code runs them), for the adapter tests.

Run as a program named ``claude`` (the tests put a ``claude`` script first on PATH that
execs this file), so `bench spawn --agent claude` gives it ``--settings JSON``. It runs the
settings' hook commands as Claude Code does (the event's JSON on standard input, the
hook's standard output read back) and reads lines in the terminal's cooked mode:

* at start the SessionStart hook; then the prompt ``? for shortcuts``;
* each line: the UserPromptSubmit hook, the line appended to ``--record FILE`` as
  ``{"line", "door": "typed"}``, then by its words:
  ``tool CMD``: the PermissionRequest hook for Bash {command: CMD}; prints ``allowed``,
  ``denied: MESSAGE`` or ``asked`` (no decision);
  ``limit``: the StopFailure hook with error rate_limit, prints the limit line, no Stop;
  ``work S``: sleeps S seconds (mail may arrive meanwhile);
* then the Stop hook: a ``{"decision": "block", "reason": LINE}`` answer is recorded as
  ``{"line": LINE, "door": "stop", "stop_at": T}`` (T: when the turn ended) and taken as the next turn's prompt, without typing;
* at EOF the SessionEnd hook, then exit 0.

Given Codex's ``-c hooks.EVENT=[...]`` options instead (run as ``codex``), it plays
Codex: SessionStart at the first line, not at start; the prompt ``← for agents · ? for
shortcuts``; ``• Working (esc to interrupt)`` while a turn runs; each turn's end clears
the screen; ``limit`` prints Codex's usage-limit message and ``fail`` an error, both
ending the turn with no hook at all (as Codex 0.171 does).
"""

import datetime
import json
import subprocess
import sys
import time
import tomllib

HOOK_NAMES = {
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "PermissionRequest",
    "SessionEnd",
}


def main() -> int:
    argv = sys.argv[1:]
    settings = json.loads(argv[argv.index("--settings") + 1]) if "--settings" in argv else {}
    codex = "-c" in argv
    for i, arg in enumerate(argv[:-1]):
        if arg == "-c":  # Codex's overrides: `hooks.Stop=[...]` is itself TOML
            for name, entries in tomllib.loads(argv[i + 1]).get("hooks", {}).items():
                settings.setdefault("hooks", {})[name] = entries
    record = argv[argv.index("--record") + 1] if "--record" in argv else None
    hooks = {
        name: entries[0]["hooks"][0]["command"]
        for name, entries in settings.get("hooks", {}).items()
        if name in HOOK_NAMES
    }

    def hook(name: str, payload: dict) -> str:
        cmd = hooks.get(name)
        if cmd is None:
            return ""
        payload = {"hook_event_name": name, "session_id": "standin", **payload}
        done = subprocess.run(
            cmd, shell=True, input=json.dumps(payload), capture_output=True, text=True
        )
        if done.stderr:
            print(f"hook {name} said: {done.stderr.strip()}", flush=True)
        return done.stdout.strip()

    def note(line: str, door: str, stop_at: float | None) -> None:
        if record:
            rec = {"t": time.time(), "line": line, "door": door, "stop_at": stop_at}
            with open(record, "a") as f:
                f.write(json.dumps(rec) + "\n")

    if record:  # the commands the adapter gave, for the tests to check
        with open(record + ".hooks", "w") as f:
            json.dump(hooks, f)
    prompt = "← for agents · ? for shortcuts" if codex else "? for shortcuts"
    started = not codex  # Codex starts its session at the first prompt
    if started:
        hook("SessionStart", {"source": "startup"})
    print(prompt, flush=True)
    pending: str | None = None
    stop_at: float | None = None  # when the turn that handed `pending` over ended
    while True:
        if pending is None:
            raw = sys.stdin.readline()
            if not raw:
                break
            line, door = raw.strip().replace("\x1b[200~", "").replace("\x1b[201~", ""), "typed"
        else:
            line, door, pending = pending, "stop", None
        note(line, door, stop_at if door == "stop" else None)  # taken: before its hooks run
        if not started:
            started = True
            hook("SessionStart", {"source": "startup"})
        if door == "typed":
            hook("UserPromptSubmit", {"prompt": line})
        if codex:
            print("• Working (0s • esc to interrupt)", flush=True)
        words = line.split(None, 1)
        if words and words[0] == "tool":
            out = hook(
                "PermissionRequest",
                {
                    "tool_name": "Bash",
                    "tool_input": {"command": words[1] if len(words) > 1 else ""},
                },
            )
            decision = json.loads(out)["hookSpecificOutput"]["decision"] if out else None
            if decision is None:
                print("asked", flush=True)
            elif decision["behavior"] == "allow":
                print("allowed", flush=True)
            else:
                print(f"denied: {decision.get('message')}", flush=True)
        elif codex and line in ("limit", "fail"):
            at = datetime.datetime.now() + datetime.timedelta(minutes=2)
            print("\x1b[2J\x1b[H", end="")  # Codex redraws: its busy line goes
            if line == "limit":
                when = at.strftime("%I:%M %p").lstrip("0")
                print(f"■ You've hit your usage limit. Try again at {when}.", flush=True)
            else:
                print("■ stream disconnected before completion", flush=True)
            print(prompt, flush=True)
            continue
        elif line == "limit":
            hook("StopFailure", {"error": "rate_limit"})
            print("You've hit your session limit · resets 11:59pm (UTC)", flush=True)
            print("? for shortcuts", flush=True)
            continue
        elif words and words[0] == "work":
            time.sleep(float(words[1]))
        else:
            print(f"ok: {line}", flush=True)
        stop_at = time.time()
        out = hook("Stop", {"stop_hook_active": door == "stop"})
        if out:
            answer = json.loads(out)
            if answer.get("decision") == "block":
                pending = answer["reason"]
                continue
        if codex:
            print("\x1b[2J\x1b[H", end="")
        print(prompt, flush=True)
    hook("SessionEnd", {"reason": "exit"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
