"""The ring through real agent TUIs (Claude Code, Codex, pi), offline.

Installs the CLIs once per user ($XDG_CACHE_HOME/bench/agents) if absent (npm
registry), gives each a throwaway
HOME with the settings that skip its dialogs, starts the scripted model server of
tests/realagents on 127.0.0.1, and spawns each agent with `bench spawn --agent KIND`:
the preset supplies the ready pattern and the paste settle, nothing else is special.
The server answers a wake line with one shell tool call that reads the path, adds one
and runs `bench mail send <next>`; the next handle comes from the ring below.
"""

import os
import shutil
import signal
import tempfile
import time

from tests.proofs.common import BIN, ProofFailed
from tests.realagents import agents as realagents
from tests.realagents.model_server import start_server


class RealRing:
    def __init__(self, kinds: list[str]):
        for k in kinds:
            if k not in realagents.KINDS:
                raise ProofFailed(f"unknown agent {k!r}; known: {', '.join(realagents.KINDS)}")
        self.names = list(kinds)
        self.work = tempfile.mkdtemp(prefix="bench-real-", dir="/tmp")
        try:
            self.bin_dir = realagents.ensure_installed()
        except realagents.AgentsUnavailable as err:
            raise ProofFailed(f"the agent CLIs cannot be installed: {err}") from None
        ring = {a: b for a, b in zip(self.names, [*self.names[1:], "operator"], strict=True)}
        self.server, self.port = start_server(ring, os.path.join(self.work, "model.log"))
        print(f"scripted model server on 127.0.0.1:{self.port}; ring "
              + " -> ".join([*self.names, "operator"]))
        versions = realagents.versions(self.bin_dir)
        print("agents: " + ", ".join(f"{k} {versions.get(k, '?')}" for k in self.names))

    def spawn(self, bench) -> dict:
        sessions = {}
        for kind in self.names:
            home = os.path.join(self.work, f"home-{kind}")
            cwd = os.path.join(self.work, f"cwd-{kind}")
            os.makedirs(cwd, exist_ok=True)
            spec = realagents.prepare(kind, home, self.port, cwd, self.bin_dir,
                                      extra_path=[BIN])
            args = ["spawn", "--name", kind, "--agent", kind, "--cwd", str(spec.cwd),
                    "--rows", "40", "--cols", "120"]
            for k, v in spec.env.items():
                args += ["--env", f"{k}={v}"]
            sessions[kind] = bench.run(*args, "--", *spec.argv)
        return sessions

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

