"""alice as a real agent TUI (Claude Code or Codex) for `just delegate-proof --real`.

As in `mail-proof-real`: the CLI is installed once per user if absent (npm registry),
runs with a throwaway HOME, and talks to the scripted model server of tests/real_agents
on 127.0.0.1. The server answers each wake line with one shell tool call that runs
alice's delegation script on the announced path, so the real TUI's own shell tool runs
`bench spawn`, `bench tail`, `bench kill` and `bench mail send` from inside her session.
"""

import os
import shlex
import shutil
import tempfile

from tests.real_agents import agents as realagents
from tests.real_agents.model_server import start_server
from tools.proofs.common import BIN, ProofFailed
from tools.proofs.real_ring import stop_processes_under


class RealAlice:
    def __init__(self, kind: str, delegator: list[str]):
        self.kind = kind
        self.work = tempfile.mkdtemp(prefix="bench-real-", dir="/tmp")
        try:
            self.bin_dir = realagents.ensure_installed()
        except realagents.AgentsUnavailable as err:
            shutil.rmtree(self.work, ignore_errors=True)
            raise ProofFailed(f"the agent CLIs cannot be installed: {err}") from None
        line = " ".join(shlex.quote(w) for w in delegator)
        self.server, self.port = start_server(
            {},
            os.path.join(self.work, "model.log"),
            answer=lambda path: f"{line} {shlex.quote(path)}",
        )
        version = realagents.versions(self.bin_dir).get(kind, "?")
        print(f"scripted model server on 127.0.0.1:{self.port}; alice is {kind} {version}")

    def spawn(self, bench) -> dict:
        home = os.path.join(self.work, "home")
        cwd = os.path.join(self.work, "cwd")
        os.makedirs(cwd, exist_ok=True)
        spec = realagents.prepare(self.kind, home, self.port, cwd, self.bin_dir, extra_path=[BIN])
        args = ["spawn", "--name", "alice", "--agent", self.kind, "--cwd", str(spec.cwd)]
        for k, v in spec.env.items():
            args += ["--env", f"{k}={v}"]
        return bench.run(*args, "--", *spec.argv)

    def print_screen(self, bench) -> None:
        try:
            lines = bench.text("tail", "alice", "--screen").splitlines()
        except ProofFailed as err:
            print(f"\n(alice: no screen: {err})")
            return
        while lines and not lines[-1].strip():
            lines.pop()
        print(f"\n--- alice's ({self.kind}) final screen ---")
        print("\n".join(lines[-25:]))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        stop_processes_under(self.work)
        shutil.rmtree(self.work, ignore_errors=True)
