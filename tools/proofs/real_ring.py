"""The ring through real agent TUIs (Claude Code, Codex, pi), offline.

Installs the CLIs once per user ($XDG_CACHE_HOME/bench/agents) if absent (npm
registry), gives each a throwaway
HOME with the settings that skip its dialogs, starts the scripted model server of
tests/real_agents on 127.0.0.1, and spawns each agent with `bench spawn --agent KIND`:
the preset supplies the ready pattern and the paste settle, nothing else is special.
The server answers a wake line with one shell tool call that reads the path, adds one
and runs `bench mail send <next>`; the next handle comes from the ring below.
"""

import json
import os
import shutil
import signal
import tempfile
import time

from tests.real_agents import agents as realagents
from tests.real_agents.model_server import shell_tool, start_server
from tools.proofs.common import BIN, ProofFailed, wait_for


class RealRing:
    def __init__(self, kinds: list[str], via: str = "shell"):
        for k in kinds:
            if k not in realagents.KINDS:
                raise ProofFailed(f"unknown agent {k!r}; known: {', '.join(realagents.KINDS)}")
        self.names = list(kinds)
        # --via mcp: the agents with an MCP client answer through `bench mcp`, no shell.
        self.mcp = [k for k in kinds if via == "mcp" and k in realagents.MCP_KINDS]
        self.work = tempfile.mkdtemp(prefix="bench-real-", dir="/tmp")
        try:
            self.bin_dir = realagents.ensure_installed()
        except realagents.AgentsUnavailable as err:
            raise ProofFailed(f"the agent CLIs cannot be installed: {err}") from None
        ring = {a: b for a, b in zip(self.names, [*self.names[1:], "operator"], strict=True)}
        self.log_path = os.path.join(self.work, "model.log")
        self.server, self.port = start_server(ring, self.log_path)
        print(
            f"scripted model server on 127.0.0.1:{self.port}; ring "
            + " -> ".join([*self.names, "operator"])
        )
        versions = realagents.versions(self.bin_dir)
        print("agents: " + ", ".join(f"{k} {versions.get(k, '?')}" for k in self.names))

    def spawn(self, bench) -> dict:
        sessions = {}
        for kind in self.names:
            home = os.path.join(self.work, f"home-{kind}")
            cwd = os.path.join(self.work, f"cwd-{kind}")
            os.makedirs(cwd, exist_ok=True)
            spec = realagents.prepare(kind, home, self.port, cwd, self.bin_dir, extra_path=[BIN])
            if kind in self.mcp:
                realagents.use_bench_mcp(spec)
            args = [
                "spawn",
                "--name",
                kind,
                "--agent",
                kind,
                "--cwd",
                str(spec.cwd),
                "--rows",
                "40",
                "--cols",
                "120",
            ]
            for k, v in spec.env.items():
                args += ["--env", f"{k}={v}"]
            sessions[kind] = bench.run(*args, "--", *spec.argv)
        return sessions

    def how_they_run(self, bench) -> str:
        """As whom the ring runs and whether the daemon sandboxes its sessions (the
        trail's `agent/state ... source=report` lines show which agents report through
        their own hooks: an adapter)."""
        caps = bench.run("status")["caps"]
        note = f" ({caps['isolation_note']})" if caps.get("isolation_note") else ""
        return f"running as uid {os.getuid()}; sessions sandboxed: {caps['isolation']}{note}"

    def wait_mcp(self, timeout: float = 60.0) -> None:
        """Wait until each MCP agent has connected to its `bench mcp`.

        Agents connect their MCP servers in the background after they start (bench mcp
        needs a second or more to import the SDK): a wake that lands before that finds
        no bench tools. Claude Code logs the connection under its cache directory.
        """
        for kind in self.mcp:
            home = os.path.join(self.work, f"home-{kind}")
            wait_for(
                lambda home=home, kind=kind: realagents.mcp_connected(kind, home),
                timeout,
                f"{kind} to connect to bench mcp",
            )
            print(f"{kind} connected to bench mcp")

    def check_mcp(self) -> None:
        """Each MCP agent was offered no shell tool and answered with read_mail, send_mail."""
        records = []
        with open(self.log_path, encoding="utf-8") as f:
            for line in f:
                records.append(json.loads(line))
        for kind in self.mcp:
            route = realagents.ROUTES[kind]
            mine = [
                r
                for r in records
                if r["path"].split("?")[0].endswith(route) and isinstance(r.get("body"), dict)
            ]
            offered = [r for r in mine if r["body"].get("tools")]
            shells = [r for r in offered if shell_tool(r["body"]) is not None]
            if not offered or shells:
                raise ProofFailed(
                    f"{kind} was offered a shell tool ({len(shells)} of "
                    f"{len(offered)} requests): it must have only MCP tools"
                )
            calls = [
                r["reply"]["tool"]
                for r in mine
                if isinstance(r.get("reply"), dict) and r["reply"].get("tool")
            ]
            if [c.rsplit("__", 1)[-1] for c in calls] != ["read_mail", "send_mail"]:
                raise ProofFailed(
                    f"{kind} made the tool calls {calls}, not read_mail then "
                    "send_mail through bench's MCP server"
                )
            print(f"{kind} answered through MCP: {' then '.join(calls)} (no shell tool offered)")

    def print_screens(self, bench) -> None:
        for kind in self.names:
            try:
                lines = bench.text("tail", kind, "--screen").splitlines()
            except ProofFailed as err:
                print(f"\n({kind}: no screen: {err})")
                continue
            while lines and not lines[-1].strip():
                lines.pop()
            print(f"\n--- {kind}'s final screen ---")
            print("\n".join(lines[-25:]))

    def close(self) -> None:
        """After the daemon is down: end whatever the agents left running in the work
        directory (Claude Code writes its project files there even after its session
        ended), then remove it."""
        self.server.shutdown()
        self.server.server_close()
        stop_processes_under(self.work)
        shutil.rmtree(self.work, ignore_errors=True)


def stop_processes_under(root: str, timeout: float = 10.0) -> None:
    """SIGKILL every process of ours whose working directory is inside root, and wait
    until they are gone (a process still there could write into root after it is
    removed)."""
    root = os.path.realpath(root)

    def inside() -> list[int]:
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if cwd == root or cwd.startswith(root + os.sep):
                pids.append(int(name))
        return pids

    deadline = time.monotonic() + timeout
    pause = 0.02
    while (pids := inside()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(pause)  # a bounded poll for exits, not a test's timing
        pause = min(pause * 2, 0.2)
