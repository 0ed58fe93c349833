"""Agent adapters: how a session spawned with `--agent NAME` makes its agent report for
itself (docs/agents.md, "Agents that report for themselves").

The agent's command line changes for that one session only, inline (so nothing but the
hook client must be readable in the sandbox), with only the hooks bench needs: the
agent waits for each.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass

# Claude Code's hook events -> bench's (benchd.core.agentstate.EVENTS).
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

# pi's extension (TypeScript, loaded with jiti). Its flags go as `--flag=value`: pi
# takes a bare extension flag's next argument as its value unless it starts with "-".
PI_EXTENSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pi_extension.ts")
ADAPTERS = ("claude", "codex", "pi")


def hook_command(bindir: str) -> list[str]:
    """The command that forwards one hook event (its name follows): the compiled
    `bench-hook` beside `bench` when `./run` built it (about 3 ms against an
    interpreter's start: the agent waits for it at every turn's end), else `bench hook`."""
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


def _subscribed(
    hooks: dict[str, str], approval_wait: float, mid_turn: bool, short: dict[str, int]
) -> list[tuple[str, str, int]]:
    """(their event, ours, timeout) for each hook; PostToolUse (a hook per tool call)
    only with the mid-turn door."""
    out = []
    for theirs, ours in dict(hooks, **({"PostToolUse": "tool"} if mid_turn else {})).items():
        # The permission hook waits for `bench approve|deny` (bounded by --approval-wait).
        wait = int(approval_wait) if ours == "permission" else 0
        out.append((theirs, ours, wait + short.get(theirs, HOOK_TIMEOUT_S)))
    return out


def claude_settings(hook: str, approval_wait: float, mid_turn: bool = False) -> str:
    """The `--settings` JSON giving Claude Code bench's hooks."""
    hooks: dict[str, list[dict[str, object]]] = {}
    for theirs, ours, timeout in _subscribed(CLAUDE_HOOKS, approval_wait, mid_turn, {}):
        entry: dict[str, object] = {
            "hooks": [{"type": "command", "command": f"{hook} {ours}", "timeout": timeout}]
        }
        if ours == "notification":
            entry["matcher"] = CLAUDE_NOTIFICATIONS
        hooks[theirs] = [entry]
    return json.dumps({"hooks": hooks}, separators=(",", ":"))


# Codex's (0.171: no StopFailure, no Notification) hook events -> bench's; Esc ends a
# turn with Interrupt. Not SessionStart: run just before the first UserPromptSubmit, its
# instant of "idle" would let a second wake be typed mid-start.
CODEX_HOOKS = {
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "Interrupt": "interrupt",
    "PermissionRequest": "permission",
    "SessionEnd": "end",
}
# Codex runs these two for at most 3 s whatever the hook asks (and hashes the clamped
# value), so they ask for 3: a report takes milliseconds.
CODEX_SHORT = {"SessionEnd": 3, "Interrupt": 3}
# Where Codex says `-c` overrides come from, in its hook trust keys.
CODEX_FLAGS_SOURCE = "/<session-flags>/config.toml"


def codex_trust_hash(label: str, command: str, timeout: int) -> str:
    """The hash Codex 0.171 trusts a command hook by (as its "Trust all" writes it): SHA-256
    of the compact, key-sorted JSON of the hook's normalized identity."""
    handler = {"type": "command", "command": command, "timeout": timeout, "async": False}
    identity = {"event_name": label, "hooks": [handler]}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _toml(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a TOML basic string


def codex_overrides(hook: str, approval_wait: float, mid_turn: bool = False) -> list[str]:
    """The `-c` options giving Codex bench's hooks for one session, each trusted by its
    hash in `hooks.state` (docs/agents.md: why not --dangerously-bypass-hook-trust)."""
    out: list[str] = []
    trust: list[str] = []
    for theirs, ours, timeout in _subscribed(CODEX_HOOKS, approval_wait, mid_turn, CODEX_SHORT):
        command = f"{hook} {ours}"
        handler = f'{{type="command",command={_toml(command)},timeout={timeout}}}'
        out += ["-c", f"hooks.{theirs}=[{{hooks=[{handler}]}}]"]
        # Codex names its events in snake case in its trust keys (user_prompt_submit).
        label = re.sub(r"(?<!^)(?=[A-Z])", "_", theirs).lower()
        key = f"{CODEX_FLAGS_SOURCE}:{label}:0:0"
        digest = codex_trust_hash(label, command, timeout)
        trust.append(f"{_toml(key)}={{trusted_hash={_toml(digest)}}}")
    out += ["-c", "hooks.state={" + ",".join(trust) + "}"]
    return out


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
        how = {"claude": "--settings", "codex": "its hooks (-c)"}.get(agent, "its extension (-e)")
        return Adapted(
            list(argv),
            None,
            f"{argv[0]!r} is not {agent} itself (a wrapper?): bench cannot give it "
            f"{how}; its wakes go by the screen",
        )
    if agent == "pi":
        added = pi_args(hook[0], mid_turn)
    elif agent == "codex":
        added = codex_overrides(shlex.join(hook), approval_wait, mid_turn)
    else:
        added = ["--settings", claude_settings(shlex.join(hook), approval_wait, mid_turn)]
    return Adapted([*argv[: at + 1], *added, *argv[at + 1 :]], agent)


# What `bench approve|deny` types into an agent's approval dialog once no hook waits
# (allow, deny): Claude Code's "Yes" is selected first; Codex 0.171's `y` is "Yes,
# proceed"; Escape refuses in both (the model is told; Codex's turn ends).
DIALOG_KEYS = {"claude": (b"\r", b"\x1b"), "codex": (b"y", b"\x1b")}

# The dialog an agent opens on a usage limit, and the keys that choose to wait for the
# reset (Claude Code 2.1: the first choice, selected).
LIMIT_DIALOG = {"claude": ("Stop and wait for limit to reset", b"\r")}


# The screen of an agent that ends some turns without a report (Codex 0.171, on an
# error), watched while it works (agenthost; docs/agents.md, "What each agent reports").
@dataclass(frozen=True, slots=True)
class TurnScreen:
    busy: str  # shown while a turn runs (gone when it is over)
    ready: re.Pattern[str]  # shown at its prompt, the input box empty
    limit: re.Pattern[str]  # its usage-limit message
    reset: re.Pattern[str]  # the reset time in it: hour, minute, AM/PM (local time)


TURN_SCREEN = {
    "codex": TurnScreen(
        busy="esc to interrupt",
        ready=re.compile(r"for agents · \? for shortcuts"),
        limit=re.compile(r"hit your usage limit"),
        reset=re.compile(r"try again at (\d{1,2}):(\d\d)\s*([AP]M)", re.IGNORECASE),
    )
}
