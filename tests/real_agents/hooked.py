"""What the tests of real agents with adapters share (tests/proofs/test_*_hooks_real.py):
the installed agent CLIs, a model server and an adapter session, the `bench events`
trail each test writes to its scratch dir, and waits on the agent's reported state."""

from pathlib import Path

import pytest

from tests.real_agents import agents as realagents
from tests.real_agents import model_server
from tests.support.daemon import BIN

TRAIL_KINDS = (
    "session/spawned",
    "mail/sent",
    "agent/state",
    "agent/answered",
    "wake/deferred",
    "agent/woken",
    "mail/read",
    "session/exited",
)
NAMES = {"claude": "Claude Code", "codex": "Codex", "pi": "pi"}


def bin_dir(kind: str) -> Path:
    """The agent CLIs' bin dir, installed if need be; the test is skipped (saying why)
    when they are not installed and the npm registry cannot be reached."""
    found = realagents.installed_bin_dir()
    if found is None or not (Path(found) / realagents.BINARIES[kind]).exists():
        if not realagents.registry_reachable():
            pytest.skip(
                f"{NAMES[kind]} is not installed and the npm registry cannot be reached "
                "to install it"
            )
        found = realagents.ensure_installed()
    return Path(found)


def start(daemon, tmp: Path, kind: str, name: str):
    """A model server answering `name`'s turns, and `name`'s prepared agent (its spec)."""
    server, port = model_server.start_server({name: "operator"}, tmp / f"{name}-model.jsonl")
    home, cwd = tmp / f"home-{name}", tmp / f"cwd-{name}"
    cwd.mkdir(parents=True, exist_ok=True)
    spec = realagents.prepare(kind, home, port, cwd, bin_dir(kind), extra_path=[BIN])
    return server, spec


def spawn(daemon, kind: str, name: str, spec, env: dict, argv: list[str], extra=()) -> dict:
    """`bench spawn --agent KIND` of the agent as prepared (40 x 120, its env)."""
    args = ["spawn", "--name", name, "--agent", kind, "--cwd", str(spec.cwd)]
    args += ["--rows", "40", "--cols", "120", *extra]
    for k, v in env.items():
        args += ["--env", f"{k}={v}"]
    return daemon.ok(*args, "--", *argv)


def trail(daemon, path: Path) -> str:
    text = daemon.bench("events").out
    lines = [line for line in text.splitlines() if any(k in line for k in TRAIL_KINDS)]
    path.write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


def operator_mail(daemon) -> list[dict]:
    return daemon.ok("mail", "list", "--handle", "operator", "--state", "all")["messages"]


def state_after(daemon, name: str, state: str, seq: int, timeout: float = 60) -> dict:
    return daemon.wait_event(
        "agent/state", lambda e: e["handle"] == name and e["state"] == state, timeout, since=seq
    )


def stop(server) -> None:
    server.shutdown()
    server.server_close()


def approve_then_deny(daemon, name: str) -> None:
    """The wake's shell call waits for an approval: the operator approves it (the tool
    runs, its mail reaches the operator); the next one is denied (the agent is told and
    its turn ends; nothing is sent)."""
    seq = daemon.last_seq()
    daemon.ok("mail", "send", name, "-m", "number 100")
    blocked = state_after(daemon, name, "blocked", seq, 90)
    assert blocked["tool"] == "Bash" and "bench mail send operator" in blocked["input"]
    assert f"{name} waits for approval: Bash" in daemon.bench("ps").out
    assert daemon.ok("approve", name)["via"] == "hook"
    daemon.wait_until(
        lambda: len(operator_mail(daemon)) >= 1, 90, "the approved tool's mail to the operator"
    )
    state_after(daemon, name, "idle", seq, 90)
    seq = daemon.last_seq()
    daemon.ok("mail", "send", name, "-m", "number 200")
    state_after(daemon, name, "blocked", seq, 90)
    daemon.ok("deny", name, "-m", "not now")
    state_after(daemon, name, "idle", seq, 90)
    assert len(operator_mail(daemon)) == 1
