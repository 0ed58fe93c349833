"""`just hostile-trial` (11)-(16): the rest of issue 38's findings, from inside sessions.

(11) refused waits in a loop (`mail wait --from <itself>`, over a raw socket): what the
     event log grows by, against its bound (one line per flood per source per
     --flood-interval);
(12) a stranger mails itself in reply to another's message (its id from `bench events`):
     does that message become `replied`, does its sender's `mail wait --reply-to` end?
(13) one tree (a session and its jobs) opens every connection it can: do another
     session's sends still get through? (A daemon of its own with small limits.)
(14) a session plants ./bench.toml in the project directory naming another session's
     inbox file as its task file: the operator's `bench up -f` there must refuse it;
(15) team files that lift limits (spawn-rate = 1e9, operator-reserve = 0), a deadline of
     "1e23d", a TOML nesting bomb: each one clear refusal, never a traceback;
(16) `mail wait --reply-to` on a message the waiter received: refused as would-deadlock.

Each attack is a role of tools/proofs/hostile_agent.py; the figures are checked from
outside (the event log's size, `mail status`, the operator's own `bench up`).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

from tests.support.daemon import BENCH
from tools.proofs.common import Bench, ProofFailed, TempDaemon, wait_for
from tools.proofs.hostile_sandbox import SandboxAttacks

if TYPE_CHECKING:
    from tools.proofs.hostile_trial import Trial

FLOOD_INTERVAL = 60.0  # the daemon's default --flood-interval (the trial's daemon keeps it)
LINE_BYTES = 1024  # generous for one refusal line (about 130 bytes in practice)
SLACK_BYTES = 16 * 1024  # the refusing session's own spawn and exit events, and the like
# (13)'s daemon: sessions may hold 40 - 8 = 32 connections, one tree 8.
CONN_OPTS = ("--max-connections", "40", "--operator-reserve", "8")
TREE_OPTS = ("--tree-connections", "8")


class RestAttacks(SandboxAttacks):
    def __init__(self, trial: Trial):
        super().__init__(trial)
        self.seconds = trial.args.refusal_seconds

    # ------------------------------------------------------------ (11)

    def refusals(self) -> None:
        seq, size0 = self.t.last_seq(), self._log_bytes()
        a = self.agent(self.b, "r-refuser", "refusals", str(self.seconds))
        got = self.found("refusals-r-refuser.json", self.seconds + 60)
        self.exited(a["session"], seq, 30)
        grown = self._log_bytes() - size0
        lines = sum(
            e["kind"] == "wait/refused" and e.get("handle") == "r-refuser"
            for e in self.b.events(seq)
        )  # fmt: skip
        made = sum(got["counts"].values())
        allowed = math.ceil(self.seconds / FLOOD_INTERVAL) + 1
        bound = allowed * LINE_BYTES + SLACK_BYTES
        self.t.row(f"(11) refused waits one session made in {self.seconds:g} s", made,
                   "", True)  # fmt: skip
        self.t.row("(11)   answered", _codes(got["counts"]))
        self.t.row("(11) events.jsonl growth meanwhile (wait/refused lines)",
                   f"{grown:,} B ({lines})", f"<= {bound:,} B ({allowed} a flood-interval)",
                   grown <= bound and "would-deadlock" in got["counts"])  # fmt: skip

    def _log_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in glob.glob(os.path.join(self.b.dir, "events*.jsonl")))

    # ------------------------------------------------------------ (12)

    def stranger(self) -> None:
        self.agent(self.b, "r-asker", "asker", "victim", "r-stranger")
        asked = self.found("asked-r-asker.json")
        self.agent(self.b, "r-stranger", "stranger", "r-asker", "victim")
        s = self.found("stranger-r-stranger.json")
        if not s["found"]:
            raise ProofFailed("the stranger found no mail from r-asker in `bench events`")
        waited = self.found("waited-r-asker.json", 60)
        st = self.b.run("mail", "status", asked["mail_id"])
        states = [m["state"] for m in st.get("states", [])]
        replied = "replied" in states
        ended = waited["code"] == "ok"
        self.t.row("(12) a stranger's reply to another's mail (its send; states after)",
                   f"{s.get('to r-stranger', 'id not found')}; {' '.join(states)}", "never replied",
                   not replied)  # fmt: skip
        self.t.row("(12)   the sender's `mail wait --reply-to` (the stranger's reply sent to it too)",
                   f"ended by {waited['from']}" if ended else waited["code"], "not ended",
                   not ended)  # fmt: skip

    # ------------------------------------------------------------ (13)

    def connections(self, isolation: str) -> None:
        opts: tuple[str, ...] = CONN_OPTS + TREE_OPTS
        d = TempDaemon("--isolation", isolation, *opts)
        try:
            d.__enter__()
        except ProofFailed:  # a daemon without --tree-connections: the attack all the same
            shutil.rmtree(d.dir, ignore_errors=True)
            opts = CONN_OPTS
            d = TempDaemon("--isolation", isolation, *opts)
            d.__enter__()
        try:
            b = d.bench
            self.agent(b, "r-bystander", "bystander", "operator", "20")
            self.agent(b, "r-conn", "connect", "120", "2")
            wait_for(
                lambda: len(_files(self.out, "conn-r-conn")) >= 3, 90, "the tree's connections"
            )
            held = sum(c["held"] for c in _files(self.out, "conn-r-conn"))
            refused: dict = {}
            for c in _files(self.out, "conn-r-conn"):
                for k, v in c["refused"].items():
                    refused[k] = refused.get(k, 0) + v
            open(os.path.join(self.out, "conn-go"), "w").close()
            sends = self.found("bystander-r-bystander.json", 90)
            open(os.path.join(self.out, "conn-stop"), "w").close()
            b.run("kill", "r-conn", "--tree", check=False)
        finally:
            d.__exit__(None, None, None)
        self.t.row("(13) its daemon's options", " ".join(opts))
        if TREE_OPTS[0] in opts:
            cap = int(TREE_OPTS[1])
            self.t.row("(13) connections one tree (a session, 2 jobs) held", held,
                       f"<= {cap} (--tree-connections)", held <= cap)  # fmt: skip
        else:
            self.t.row("(13) connections one tree (a session, 2 jobs) held", held)
        self.t.row("(13)   then refused", _codes(refused))
        bad = sum(v for k, v in sends.items() if k != "ok")
        self.t.row("(13) another session's 20 sends meanwhile", _codes(sends), "all ok",
                   bad == 0)  # fmt: skip

    # ------------------------------------------------------------ (14), (15)

    def team_files(self) -> None:
        project = os.path.join(self.out, "project")
        os.makedirs(project, exist_ok=True)
        self.agent(self.b, "r-plant", "plant", project, "victim", flags=("--cwd", project))
        got = self.found("plant-r-plant.json")
        planted = os.path.join(project, "bench.toml")
        if not got["path"] or not os.path.exists(planted):
            raise ProofFailed("the planting agent found no victim's mail in `bench events`")
        rc, said = self._up(self.b.dir, planted)
        sent = rc == 0  # the planted agent started with the victim's mail as its task
        if sent:
            self.b.run("kill", "planted", check=False)
        self.t.row("(14) `bench up -f` of a planted ./bench.toml naming the victim's inbox",
                   "accepted: the victim's mail sent as a task" if sent else said, "refused", not sent and "Traceback" not in said)  # fmt: skip
        for name in ("spawn-rate", "operator-reserve", "deadline", "nesting"):
            fresh = tempfile.mkdtemp(prefix="bench-team-", dir="/tmp")
            try:
                rc, said = self._up(fresh, os.path.join(self.out, f"bad-{name}", "bench.toml"))
            finally:
                Bench(fresh).run("down", check=False)
                shutil.rmtree(fresh, ignore_errors=True)
            # Refused, by a code other than `internal` (an error the daemon did not foresee).
            ok = rc != 0 and "Traceback" not in said and not said.startswith("internal")
            value = "accepted" if rc == 0 else said.strip().splitlines()[-1]
            self.t.row(f"(15) a team file's {name}", value, "one clear refusal", ok)

    def _up(self, bench_dir: str, team: str) -> tuple[int, str]:
        """The operator's `bench up -f TEAM` in the team file's directory: its exit code and
        what it said (its error's code and sentence; a traceback whole)."""
        p = subprocess.run([BENCH, "up", "-f", team, "--json"], capture_output=True,
                           text=True, env=Bench(bench_dir).env(), cwd=os.path.dirname(team),
                           stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
        if "Traceback" in p.stdout + p.stderr:
            return p.returncode, p.stdout + p.stderr
        try:
            err = json.loads(p.stdout.strip().splitlines()[-1]).get("error") or {}
        except (ValueError, IndexError):
            return p.returncode, (p.stderr.strip() or p.stdout.strip())[-200:]
        # The sentence without the file's name (the table's column is narrow).
        sentence = re.sub(r"^\S*\.toml(:\d+)?: ", "", err.get("message", ""))
        return p.returncode, f"{err.get('code', 'ok')}: {sentence}"

    # ------------------------------------------------------------ (16)

    def wait_received(self) -> None:
        self.agent(self.b, "r-received", "wait-received")
        wait_for(lambda: self._known("r-received"), 60, "r-received to start")
        self.b.run("mail", "send", "r-received", "-m", "answer me, if you can")
        got = self.found("received-r-received.json", 60)
        self.t.row("(16) `mail wait --reply-to` a message one received", got["code"],
                   "would-deadlock", got["code"] == "would-deadlock")  # fmt: skip

    def _known(self, handle: str) -> bool:
        return any(s["handle"] == handle for s in self.t.sessions())


def _files(out: str, prefix: str) -> list[dict]:
    from tools.proofs.hostile_trial import files

    return files(out, prefix)


def _codes(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"
