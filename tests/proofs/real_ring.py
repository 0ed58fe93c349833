"""The ring through real agent TUIs (Claude Code, Codex, pi), offline.

Installs the CLIs into .cache/agents if absent (npm registry), gives each a throwaway
HOME with the settings that skip its dialogs, starts the scripted model server of
tests/realagents on 127.0.0.1, and spawns each agent with `bench spawn --agent KIND`:
the preset supplies the ready pattern and the paste settle, nothing else is special.
The server answers a wake line with one shell tool call that reads the path, adds one
and runs `bench mail send <next>`; the next handle comes from the ring below.
"""

import os
import shutil
import tempfile

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
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.work, ignore_errors=True)

