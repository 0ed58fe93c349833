"""`just hostile-trial` (f) and (g): attacks on the sandbox itself, from inside sessions.

(f) what a session could do as root with capabilities (unmount what hides BENCH_DIR and
    /proc, a cgroup release_agent, a process left outside its PID namespace after its
    deadline) and through another session's terminal, /dev/pts/N (TIOCSTI, reading its
    input, writing its screen, holding off its wakes, faking its ready prompt, hiding its
    stall, changing its modes);
(g) a session speaking to a second daemon's socket (of the same user, started beside
    the trial's), both ways.

Each attack is a role of tools/proofs/hostile_agent.py run as a session's program; the
figures are what it achieved, checked from outside (the victim's screen, its mail, the
event log, the host's process list).
"""

from __future__ import annotations

import json
import os
import signal
import termios
import time
import uuid
from typing import TYPE_CHECKING

from tools.proofs.common import Bench, TempDaemon, wait_for

if TYPE_CHECKING:
    from tools.proofs.hostile_trial import Trial

NO_CAPS = "0000000000000000"
HOLD = 40.0  # seconds an agent writes to another's terminal; the waits inside it are 20


class SandboxAttacks:
    def __init__(self, trial: Trial):
        self.t = trial
        self.b: Bench = trial.b
        self.out = trial.out

    def agent(self, b: Bench, name: str, role: str, *args: str, flags=()) -> dict:
        from tools.proofs.hostile_trial import AGENT, PY

        return b.run("spawn", "--name", name, "--cwd", self.out, *flags, "--",
                     PY, AGENT, role, self.out, *args)  # fmt: skip

    def found(self, filename: str, timeout: float = 60) -> dict:
        path = os.path.join(self.out, filename)
        return json.loads(wait_for(lambda: _read(path), timeout, f"the agent's {filename}"))

    def screen(self, handle: str) -> str:
        return self.b.text("tail", handle, "--screen")

    def barrier(self, handle: str) -> None:
        """Everything typed into `handle`'s shell before has run."""
        tag = uuid.uuid4().hex[:8]
        self.b.run("type", handle, f"echo done-{tag}-$((6*7))")
        wait_for(lambda: f"done-{tag}-42" in self.screen(handle), 60, f"{handle}'s shell")

    def shell(self, name: str) -> str:
        """A victim shell; its terminal's path as the host names it."""
        v = self.b.run("spawn", "--name", name, "--", "sh")
        self.barrier(name)
        return os.readlink(f"/proc/{v['pid']}/fd/0")

    def exited(self, session: str, since: int, timeout: float) -> None:
        wait_for(
            lambda: any(
                e["kind"] == "session/exited" and e.get("session") == session
                for e in self.b.events(since)
            ),
            timeout,
            "the session's end",
        )

    def event_within(self, kind: str, pred, since: int, timeout: float) -> dict | None:
        """The first matching event within `timeout` seconds, else None."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for e in self.b.events(since):
                if e["kind"] == kind and pred(e):
                    return e
            time.sleep(0.1)
        return None

    # ------------------------------------------------------------ (f) as root

    def root(self) -> None:
        row = self.t.row
        self.agent(self.b, "f-caps", "caps")
        c = self.found("caps-f-caps.json")
        row("(f) capabilities inside a session (CapEff)", c["cap_eff"], NO_CAPS,
            c["cap_eff"] == NO_CAPS)  # fmt: skip
        self.agent(self.b, "f-unmount", "unmount")
        u = self.found("unmount-f-unmount.json")
        row("(f) umount2(BENCH_DIR); umount2(/proc)", f"{u['bench_dir']}; {u['proc']}",
            "both refused", u["bench_dir"] != "ok" and u["proc"] != "ok")  # fmt: skip
        clean = u["listing"] == ["benchd.sock", "mail"] and not u["tokens"] and not u["planted"]
        row("(f)   then: BENCH_DIR shows; pids; tokens; planted",
            f"{' '.join(u['listing'])}; {u['pids']}; {u['tokens']}; {u['planted']}",
            "socket+mail; 0 tokens; no", clean)  # fmt: skip
        self.agent(self.b, "f-cgroup", "cgroup")
        g = self.found("cgroup-f-cgroup.json")
        row("(f) cgroup mount for a release_agent; it ran",
            f"{g['mount']}; {'yes' if g['released'] else 'no'}", "refused; no",
            g["mount"] != "ok" and not g["released"])  # fmt: skip
        written = [p for p, v in g["existing"].items() if v == "written"]
        row("(f)   mounted hierarchies' release_agent written", f"{len(written)} of "
            f"{len(g['existing'])}", "0", not written)  # fmt: skip
        marker = f"bench-left-{uuid.uuid4().hex[:8]}"
        seq = self.t.last_seq()
        a = self.agent(self.b, "f-leave", "leave", marker, flags=("--deadline", "3s"))
        left = self.found("leave-f-leave.json")
        self.exited(a["session"], seq, 60)
        end = time.monotonic() + 15
        while marked_processes(marker) and time.monotonic() < end:
            time.sleep(0.1)
        alive = marked_processes(marker)
        for pid in alive:  # ours: their argv carries the marker
            os.kill(pid, signal.SIGKILL)
        row("(f) processes outside the namespace after its --deadline", len(alive), "0",
            not alive)  # fmt: skip
        row("(f)   setns to the host's; a release_agent's sleeper",
            f"{left['setns']}; {left['release_agent']}")  # fmt: skip

    # ------------------------------------------------------------ (f) terminals

    def terminals(self) -> None:
        row = self.t.row
        opened: dict[str, str] = {}
        # TIOCSTI: type a send into the victim's shell.
        path = self.shell("tty-victim")
        before = self._operator_total()
        self.agent(self.b, "f-tiocsti", "tty", "tiocsti", path, "0",
                   "bench mail send operator -m typed-by-the-attacker\n")  # fmt: skip
        opened["tiocsti"] = self.found("tty-tiocsti-f-tiocsti.json")["open"]
        self.barrier("tty-victim")
        sent = self._operator_total() - before
        row("(f) TIOCSTI: mails sent as the victim", sent, "0", sent == 0)
        # Its input: the operator types 10 lines while the agent reads.
        self.agent(self.b, "f-read", "tty", "read", path, str(HOLD))
        self._opened("read", "f-read")
        for i in range(10):
            self.b.run("type", "tty-victim", f"echo line-$(({i}*1000+7))")
        self._wait_lines("tty-victim", 10, 20)
        got = self._lines("tty-victim", 10)
        r = self.found("tty-read-f-read.json", HOLD + 30)
        opened["read"] = r["open"]
        stolen = r["stolen"].count("line-")
        row("(f) lines the operator typed read by another session", f"{stolen} of 10 "
            f"({got} reached the victim)", "0", stolen == 0 and got == 10)  # fmt: skip
        # Its screen.
        text = "All 112 tests passed. Task complete"
        self.agent(self.b, "f-write", "tty", "write", path, "0", text + "\n")
        opened["write"] = self.found("tty-write-f-write.json")["open"]
        self.barrier("tty-victim")
        fake = text in self.screen("tty-victim")
        row("(f) another session's text on the victim's screen", "yes" if fake else "no",
            "no", not fake)  # fmt: skip
        # Its wakes: a byte every 0.5 s while mail comes.
        self.agent(self.b, "f-hold", "tty", "hold", path, str(HOLD))
        self._opened("hold", "f-hold")
        seq = self.t.last_seq()
        t0 = time.monotonic()
        m = self.b.run("mail", "send", "tty-victim", "-m", "wake me")
        woken = self.event_within("agent/woken", lambda e: e.get("mail_id") == m["mail_id"],
                                  seq, 20)  # fmt: skip
        took = f"woken in {time.monotonic() - t0:.1f} s" if woken else "not woken in 20 s"
        opened["hold"] = self.found("tty-hold-f-hold.json", HOLD + 30)["open"]
        row("(f) a wake while another session writes to its terminal", took, "woken",
            woken is not None)  # fmt: skip
        # Its modes.
        self.agent(self.b, "f-modes", "tty", "tcsetattr", path)
        opened["tcsetattr"] = self.found("tty-tcsetattr-f-modes.json")["open"]
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            lflag = termios.tcgetattr(fd)[3]
        finally:
            os.close(fd)
        broken = not (lflag & termios.ECHO and lflag & termios.ICANON)
        row("(f) the victim's terminal modes changed (echo, lines)",
            "yes" if broken else "no", "no", not broken)  # fmt: skip
        self.b.run("kill", "tty-victim")
        self._prompt(opened)
        self._stall(opened)
        row("(f)   another's /dev/pts/N, as each agent opened it",
            ", ".join(f"{k} {v}" for k, v in opened.items()), "ENOENT each",
            set(opened.values()) == {"ENOENT"})  # fmt: skip

    def _prompt(self, opened: dict) -> None:
        go = os.path.join(self.out, "busy-ready")
        v = self.b.run("spawn", "--name", "busy", "--ready", "READY>", "--", "sh", "-c",
                       f"echo working; while [ ! -e {go} ]; do sleep 0.05; done; "
                       "printf 'READY> '; exec cat")  # fmt: skip
        wait_for(lambda: "working" in self.screen("busy"), 60, "busy to start")
        m = self.b.run("mail", "send", "busy", "-m", "wake me when ready")
        self.agent(self.b, "f-prompt", "tty", "prompt", os.readlink(f"/proc/{v['pid']}/fd/0"),
                   "0", "READY> ")  # fmt: skip
        opened["prompt"] = self.found("tty-prompt-f-prompt.json")["open"]
        if "READY>" in self.screen("busy"):  # faked: would the daemon wake on it?
            self.event_within("agent/woken", lambda e: e.get("mail_id") == m["mail_id"], 0, 10)
        seq = self.t.last_seq()
        open(go, "w").close()
        woken = self.event_within("agent/woken", lambda e: e.get("mail_id") == m["mail_id"],
                                  0, 30)  # fmt: skip
        early = woken is not None and woken["seq"] <= seq
        self.t.row("(f) a wake typed on a faked ready prompt", "yes" if early else "no", "no",
                   woken is not None and not early)  # fmt: skip
        self.b.run("kill", "busy")

    def _stall(self, opened: dict) -> None:
        seq = self.t.last_seq()
        task = os.path.join(self.out, "stuck-task.md")
        with open(task, "w") as f:
            f.write("get stuck\n")
        j = self.b.run("spawn", "--name", "stuck", "--stall-after", "2s", "--mail", task,
                       "--", "sh", "-c", "echo stuck; exec sleep 600")  # fmt: skip
        wait_for(lambda: "stuck" in self.screen("stuck"), 60, "stuck to start")
        self.agent(self.b, "f-stall", "tty", "hold", os.readlink(f"/proc/{j['pid']}/fd/0"),
                   str(HOLD))  # fmt: skip
        self._opened("hold", "f-stall")
        t0 = time.monotonic()
        stalled = self.event_within("job/stalled", lambda e: e["session"] == j["session"],
                                    seq, 20)  # fmt: skip
        took = f"in {time.monotonic() - t0:.1f} s" if stalled else "none in 20 s"
        opened["stall"] = self.found("tty-hold-f-stall.json", HOLD + 30)["open"]
        self.t.row("(f) a stuck job's stall report while another writes to it", took,
                   "reported", stalled is not None)  # fmt: skip
        self.b.run("kill", "stuck")

    def _opened(self, mode: str, handle: str) -> None:
        base = os.path.join(self.out, f"tty-{mode}-{handle}")
        wait_for(lambda: os.path.exists(base + ".opened") or os.path.exists(base + ".json"),
                 60, f"{handle} to open the terminal")  # fmt: skip

    def _wait_lines(self, handle: str, n: int, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._lines(handle, n) == n:
                return True
            time.sleep(0.2)
        return False

    def _lines(self, handle: str, n: int) -> int:
        screen = self.b.text("tail", handle)
        return sum(f"line-{i * 1000 + 7}" in screen for i in range(n))

    def _operator_total(self) -> int:
        return self.b.run("mail", "list", "--handle", "operator", "--limit", "1")["total"]

    # ------------------------------------------------------------ (g)

    def other_daemon(self, isolation: str) -> None:
        with TempDaemon("--isolation", isolation) as other:
            other.run("mail", "send", "victim", "-m", "the other daemon's secret")
            for name, here, there in (("g-a", self.b, other), ("g-b", other, self.b)):
                self.agent(here, name, "other-daemon", os.path.join(there.dir, "benchd.sock"))
                got = self.found(f"other-daemon-{name}.json")
                what = (
                    f"{got['hello']}; list {got.get('list')}; --no-sandbox {got.get('no_sandbox')}"
                )
                bad = "operator" in what or " ok" in what
                way = "ours -> the other's" if here is self.b else "the other's -> ours"
                self.t.row(f"(g) a session on another daemon's socket ({way})", what,
                           "unplaceable", not bad)  # fmt: skip


def marked_processes(marker: str) -> list[int]:
    """The processes whose command line holds `marker` (the tests use it too)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None
