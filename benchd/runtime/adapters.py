"""Agent adapters: how a session spawned with `--agent NAME` makes its agent report for
itself (docs/agents.md).

An adapter changes the agent's command line for that one session, never the user's own
configuration files, and subscribes only to the lifecycle events bench needs (nothing per
tool call unless the mid-turn door is asked for: the agent waits for its hooks):

- claude: `--settings JSON` (merged over the user's settings), whose hooks run
  `bench-hook EVENT` (the compiled client, bench_cli/bench_hook.c) or `bench hook EVENT`. The settings are passed inline, so nothing has to be readable inside the
  sandbox but the `bench` program.
- pi: `-e pi_extension.ts` (an extension file shipped beside this module; the sandbox
  shows the whole file system but BENCH_DIR, so pi reads it in there too) and
  `--bench-program=PROGRAM`, a flag the extension registers: it runs `PROGRAM EVENT`
  (`bench-hook`) or `PROGRAM hook EVENT` (`bench`) itself (child_process, no shell) and hands the answers to pi (`pi.sendUserMessage`). pi has no
  permission prompts, so it never reports `permission`.

`bench hook EVENT` forwards the hook's JSON to the daemon and prints its answer: the
Stop hook's answer can hand the agent its next instruction (a wake line: the door for
mail that arrived mid-turn), the PermissionRequest hook's answer is the approval.

Codex has no adapter yet (docs/agents.md says why); its sessions, and every program
without an adapter, keep the screen-based wakes.
"""

import json
import os
import shlex
import shutil
from dataclasses import dataclass

# Claude Code's hook events -> bench's (benchd.core.agentstate.EVENTS). Only these are
# subscribed: each costs the agent a process start when it fires.
CLAUDE_HOOKS = {
    "SessionStart": "start",
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "StopFailure": "stop-failure",
    "PermissionRequest": "permission",
    "Notification": "notification",
    "SessionEnd": "end",
}
# The Notification types bench reads (the rest, e.g. auth_success, are not subscribed).
CLAUDE_NOTIFICATIONS = "permission_prompt|idle_prompt"
HOOK_TIMEOUT_S = 30  # a hook that only forwards a report; the daemon answers at once

# pi's extension (TypeScript; pi loads it with jiti, no build step) and the flags it
# registers. Values go in `--flag=value` form: pi takes a bare extension flag's next
# argument as its value when that does not start with "-".
PI_EXTENSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pi_extension.ts")
ADAPTERS = ("claude", "pi")


def hook_command(bindir: str) -> list[str]:
    """The command that forwards one hook event (the event's name follows it): the
    compiled `bench-hook` beside `bench` when `./run` could build it (about 3 ms,
    against an interpreter's start for `bench hook`: the agent waits for its hooks at
    every turn's end), else `bench hook`."""
    for name, tail in (("bench-hook", []), ("bench", ["hook"])):
        found = shutil.which(name, path=bindir)
        if found:
            return [found, *tail]
    return ["bench", "hook"]


@dataclass(frozen=True, slots=True)
class Adapted:
    argv: list[str]
    adapter: str | None  # the adapter applied, or None: the screen decides (fallback)
    why_not: str | None = None  # when an adapter exists but could not be applied


def claude_settings(hook: str, approval_wait: float, mid_turn: bool = False) -> str:
    """The `--settings` JSON giving Claude Code bench's hooks (PostToolUse too with the
    mid-turn door: a hook per tool call, so only when asked for)."""
    hooks: dict[str, list[dict[str, object]]] = {}
    subscribed = dict(CLAUDE_HOOKS, **({"PostToolUse": "tool"} if mid_turn else {}))
    for theirs, ours in subscribed.items():
        timeout = HOOK_TIMEOUT_S
        if ours == "permission":
            # The hook waits for `bench approve|deny` (the daemon bounds it by
            # --approval-wait, then answers nothing: the agent's own dialog asks).
            timeout = int(approval_wait) + HOOK_TIMEOUT_S
        entry: dict[str, object] = {
            "hooks": [{"type": "command", "command": f"{hook} {ours}", "timeout": timeout}]
        }
        if ours == "notification":
            entry["matcher"] = CLAUDE_NOTIFICATIONS
        hooks[theirs] = [entry]
    return json.dumps({"hooks": hooks}, separators=(",", ":"))


def _program_at(argv: list[str], name: str) -> int | None:
    """Where the agent's program is in argv: argv[0], or after `env [A=B ...]`."""
    for i, arg in enumerate(argv):
        base = os.path.basename(arg)
        if base == name or base == f"{name}.exe":
            return i
        if i == 0 and base == "env":
            continue
        if i > 0 and os.path.basename(argv[0]) == "env" and ("=" in arg or arg.startswith("-")):
            continue
        return None
    return None


def pi_args(program: str, mid_turn: bool = False) -> list[str]:
    """pi's options loading bench's extension (the tool_result report too with the
    mid-turn door). `program` is `bench-hook` or `bench` (the extension adds `hook`)."""
    args = ["-e", PI_EXTENSION, f"--bench-program={program}"]
    if mid_turn:
        args.append("--bench-mid-turn=1")
    return args


def adapt(
    agent: str | None,
    argv: list[str],
    hook: list[str],
    approval_wait: float,
    mid_turn: bool = False,
) -> Adapted:
    """The session's command line with its agent's hooks, when bench has an adapter for
    it and can see where the agent's own options go."""
    if agent is None or agent not in ADAPTERS:
        return Adapted(list(argv), None)
    at = _program_at(argv, agent)
    if at is None:
        how = "--settings" if agent == "claude" else "its extension (-e)"
        return Adapted(
            list(argv),
            None,
            f"{argv[0]!r} is not {agent} itself (a wrapper?): bench cannot give it "
            f"{how}; its wakes go by the screen",
        )
    if agent == "pi":
        added = pi_args(hook[0], mid_turn)
    else:
        added = ["--settings", claude_settings(shlex.join(hook), approval_wait, mid_turn)]
    return Adapted([*argv[: at + 1], *added, *argv[at + 1 :]], agent)


# What `bench approve|deny` types into an agent's approval dialog when no hook waits
# for the answer (its wait ran out): allow, deny. Claude Code's dialog has "Yes"
# selected first; Escape refuses and tells the model it was refused.
DIALOG_KEYS = {"claude": (b"\r", b"\x1b")}

# The dialog an agent opens over its input box when it hits a usage limit, and the keys
# that choose to wait for the reset (bench parks its wakes meanwhile). Claude Code 2.1:
# "What do you want to do? 1. Stop and wait for limit to reset 2. Upgrade your plan",
# the first selected.
LIMIT_DIALOG = {"claude": ("Stop and wait for limit to reset", b"\r")}
