"""`just hostile-trial`: attack a fresh daemon as a prompt-injected agent would, from inside.

A fresh daemon (`--isolation auto` and the default limits unless told otherwise) gets a
victim session with a secret in its mailbox. Then three trees, each rooted at a session
the operator spawned, attack it with nothing but `bench` and plain Python inside their
sessions (tools/proofs/hostile_agent.py):

  (a) churn: a delegated job spawns jobs as fast as it is allowed, each job spawning
      more, for --seconds (60); it also mails new handles to make mailboxes. Counted:
      the sessions its tree started, the most alive at once, the mailboxes made.
  (b) flood: a root session and every job it may spawn (and theirs) send to the victim
      as fast as their connections go for --flood-seconds (10), never backing off.
      Counted: sends acknowledged; meanwhile the operator's own sends are timed.
  (c) snoop: a delegated job reads every /proc/*/environ for other sessions' tokens and
      opens every file under BENCH_DIR (the victim's mail, the index, the journal, the
      event log) that is not its own mail.
  (d) the escaped child: a job forks a child that calls setsid (also a double fork) and
      exits; the child speaks on the old connection and a fresh one once the session
      has ended. And the accept race: connect, fork, the connector exits, the child
      speaks, --race (200) times. Counted: what the daemon took each for.
  (e) a job's `--ready '(a+)+$'` fed forty a's and a `!`: the operator's hello latency
      while it runs, and the time to end it.
  (f) the sandbox itself (tools/proofs/hostile_sandbox.py): capabilities, unmounting
      what hides BENCH_DIR and /proc, a cgroup release_agent, a process left outside
      the session's PID namespace after its deadline; and another session's terminal
      (/dev/pts/N): TIOCSTI, its input, its screen, its wakes, its ready prompt, its
      stall, its modes.
  (g) a second daemon of the same user beside it: a session of each speaks to the
      other's socket.
  (11)-(16) (tools/proofs/hostile_rest.py): refused waits in a loop against the event
      log's bound, a stranger's reply, one tree taking every connection, a planted
      ./bench.toml, team files that lift limits or nest too deep, a wait on a reply to
      mail one received.

It prints a table of figures, each against the limit it must stay within, and exits 1
if any attack succeeds: a token or a foreign file read, a file planted, an escaped
child or a raced connection taken for the operator (or reading the victim's mail), a
limit exceeded, the operator's hello slower than --latency-limit during (e), or any
attack of (f), (g) or (11)-(16) that worked.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time

from bench_wire.client import Client, request
from tools.proofs.common import ProofFailed, TempDaemon, wait_for
from tools.proofs.hostile_rest import RestAttacks
from tools.proofs.hostile_sandbox import SandboxAttacks

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_agent.py")
PY = sys.executable


def operator_call(bench_dir: str, verb: str, **fields) -> tuple[float, dict]:
    """One request on a fresh connection, as a CLI would: (seconds it took, answer)."""
    t0 = time.monotonic()
    with Client(bench_dir) as conn:
        answer = conn.call(request(verb, fields))
    return time.monotonic() - t0, answer


class Sampler(threading.Thread):
    """The operator's own requests, one every `pause` seconds until stopped."""

    def __init__(self, bench_dir: str, verb: str, pause: float = 0.05, **fields):
        super().__init__(daemon=True)
        self.args = (bench_dir, verb)
        self.fields = fields
        self.pause = pause
        self.times: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                took, _ = operator_call(*self.args, **self.fields)
                self.times.append(took)
            except Exception as err:  # noqa: BLE001 - a refusal is a figure, not a crash
                self.errors.append(f"{type(err).__name__}: {err}")
            self.stop.wait(self.pause)

    def figures(self) -> tuple[float, float, int]:
        """(median ms, max ms, samples)."""
        if not self.times:
            return float("nan"), float("nan"), 0
        return statistics.median(self.times) * 1000, max(self.times) * 1000, len(self.times)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_of(sessions: list[dict], root: str) -> list[dict]:
    """The sessions below the session id `root` (its jobs, theirs, ...)."""
    below, ids, grew = [], {root}, True
    while grew:
        grew = False
        for s in sessions:
            if s.get("parent") in ids and s["session"] not in ids:
                ids.add(s["session"])
                below.append(s)
                grew = True
    return below


def live_peak(events: list[dict], ids: set[str]) -> int:
    live = peak = 0
    for e in events:
        if e.get("session") in ids and e["kind"] == "session/spawned":
            live += 1
            peak = max(peak, live)
        elif e.get("session") in ids and e["kind"] == "session/exited":
            live -= 1
    return peak


def in_session(*argv: str) -> list[str]:
    """A root's program: start the agent as its delegated job, then stay."""
    cmd = shlex.join(["bench", "spawn", *argv[:2], "--mail", "-", "--", PY, AGENT, *argv[2:]])
    return ["sh", "-c", f"echo task | {cmd}; exec sleep 600"]


def files(out: str, prefix: str) -> list[dict]:
    found = []
    for name in sorted(os.listdir(out)):
        if name.startswith(prefix) and name.endswith(".json"):
            with open(os.path.join(out, name)) as f:
                found.append(json.load(f))
    return found


class Trial:
    def __init__(self, bench, args, out: str):
        self.b = bench
        self.args = args
        self.out = out
        self.caps = operator_call(bench.dir, "hello")[1]["caps"]
        self.rows: list[tuple[str, str, str, bool]] = []  # figure, value, limit, held

    def row(self, figure: str, value, limit: str = "", held: bool = True) -> None:
        self.rows.append((figure, str(value), limit, held))

    def sessions(self) -> list[dict]:
        return operator_call(self.b.dir, "session/list")[1]["sessions"]

    def last_seq(self) -> int:
        ev = self.b.events()
        return ev[-1]["seq"] if ev else 0

    # ------------------------------------------------------------ (a)

    def churn(self) -> None:
        seconds = self.args.seconds
        caps = self.caps
        seq0 = self.last_seq()
        boxes0 = operator_call(self.b.dir, "hello")[1]["mailboxes"]
        end = time.time() + seconds
        root = self.b.run("spawn", "--name", "churn-root", "--cwd", self.out, "--",
                          *in_session("--name", "churn-agent", "churn", self.out, str(end), "top"))  # fmt: skip
        wait_for(
            lambda: os.path.exists(os.path.join(self.out, "churn-churn-agent.json")),
            seconds + 60,
            "the churning agent's tally",
        )
        time.sleep(1)  # jobs that were mid-spawn at the end
        below = tree_of(self.sessions(), root["session"])
        peak = live_peak(self.b.events(seq0), {s["session"] for s in below})
        boxes = operator_call(self.b.dir, "hello")[1]["mailboxes"] - boxes0
        self.b.run("kill", "churn-root", "--tree")
        with open(os.path.join(self.out, "churn-churn-agent.json")) as f:
            top = json.load(f)
        refused = {}
        for t in files(self.out, "churn-"):
            for k, v in t["refused"].items():
                refused[k] = refused.get(k, 0) + v
        n = len(below)
        d, c = caps["max_depth"], caps["max_children"]
        bound = sum(c**k for k in range(1, d + 1))
        self.row(f"(a) sessions one agent's tree started in {seconds:g} s", n,
                 f"<= {caps['spawn_rate']} (spawn-rate, an hour)", n <= caps["spawn_rate"])  # fmt: skip
        self.row("(a)   of them started by the agent and its jobs", n - 1)
        self.row("(a)   spawns refused", _codes(refused))
        self.row("(a) most of them alive at once", peak, f"<= {bound} (max-children^1..depth)",
                 peak <= bound)  # fmt: skip
        self.row("(a) mailboxes made (its jobs' and mail to new handles)", boxes,
                 f"<= {caps['tree_mailboxes']} (+1: the root's)", boxes <= caps["tree_mailboxes"] + 1)  # fmt: skip
        self.row("(a)   sends to new handles refused", _codes(top["mail_refused"]))

    # ------------------------------------------------------------ (b)

    def flood(self) -> None:
        seconds = self.args.flood_seconds
        caps = self.caps
        total0 = self._victim_total()
        idle = Sampler(self.b.dir, "mail/send", to="opbox", body="the operator's own")
        idle.start()  # the operator's sends before the flood: the figure to compare with
        time.sleep(2)
        idle.stop.set()
        idle.join()
        root = self.b.run("spawn", "--name", "flood-root", "--cwd", self.out, "--",
                          PY, AGENT, "flood", self.out, "victim")  # fmt: skip
        stable = {"n": -1, "since": time.monotonic()}

        def all_ready() -> bool:
            live = [s for s in tree_of(self.sessions(), root["session"]) if s["state"] == "running"]
            ready = len(files(self.out, "ready-"))
            if ready != stable["n"]:
                stable.update(n=ready, since=time.monotonic())
            return ready == len(live) + 1 and time.monotonic() - stable["since"] > 1.5

        wait_for(all_ready, 120, "the flooders to be ready")
        flooders = stable["n"]
        start = time.time() + 0.3
        with open(os.path.join(self.out, "go.tmp"), "w") as f:
            json.dump([start, start + seconds], f)
        os.rename(os.path.join(self.out, "go.tmp"), os.path.join(self.out, "go"))
        sampler = Sampler(self.b.dir, "mail/send", to="opbox", body="the operator's own")
        pid = operator_call(self.b.dir, "hello")[1]["pid"]
        while time.time() < start:
            time.sleep(0.01)
        sampler.start()
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        wait_for(lambda: len(files(self.out, "sent-")) >= flooders, seconds + 60, "the tallies")
        busy = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        sampler.stop.set()
        sampler.join()
        sent = files(self.out, "sent-")
        acked = sum(s["acked"] for s in sent)
        refused = {}
        for s in sent:
            for k, v in s["refused"].items():
                refused[k] = refused.get(k, 0) + v
        delivered = self._victim_total() - total0
        self.b.run("kill", "flood-root", "--tree")
        # The bucket is full at the start and refills at send-rate; the window's own
        # edges (a send answered just after it closed) get half a second.
        cap = caps["send_burst"] + caps["send_rate"] * (seconds + 0.5)
        med, mx, n = sampler.figures()
        self.row(f"(b) sends one tree had acknowledged in {seconds:g} s ({flooders} sessions)",
                 acked, f"<= {cap:.0f} (send-burst + send-rate x s)", acked <= cap)  # fmt: skip
        self.row("(b)   delivered to the victim (its mailbox's count)", delivered,
                 f"<= {cap:.0f}", delivered <= cap)  # fmt: skip
        self.row("(b)   sends refused", _codes(refused))
        self.row(f"(b) the operator's own send meanwhile, median / max ({n} sends)",
                 f"{med:.1f} / {mx:.1f} ms", "all answered", not sampler.errors)  # fmt: skip
        med, mx, n = idle.figures()
        self.row(f"(b)   the same before the flood ({n} sends)", f"{med:.1f} / {mx:.1f} ms")
        self.row("(b)   the daemon's CPU during the flood", f"{busy:.0%} of one core")

    def _victim_total(self) -> int:
        return operator_call(self.b.dir, "mail/list", handle="victim", limit=1)[1]["total"]

    # ------------------------------------------------------------ (c), (d), (e)

    def probe(self, victim_path: str) -> None:
        known = [victim_path]
        for root, _dirs, names in os.walk(self.b.dir):
            known += [os.path.join(root, n) for n in names]
        with open(os.path.join(self.out, "known.json"), "w") as f:
            json.dump(known, f)
        self.b.run("spawn", "--name", "probe-root", "--cwd", self.out, "--",
                   *in_session("--name", "probe-agent", "probe", self.out,
                               str(self.args.race), str(self.args.hold)))  # fmt: skip
        sampler = Sampler(self.b.dir, "hello", pause=0.02)
        wait_for(lambda: os.path.exists(os.path.join(self.out, "pattern-start.json")),
                 120 + self.args.race, "the probe to reach the pattern")  # fmt: skip
        sampler.start()
        wait_for(lambda: os.path.exists(os.path.join(self.out, "pattern-done.json")),
                 120 + self.args.hold, "the pattern's end")  # fmt: skip
        sampler.stop.set()
        sampler.join()
        probe = json.loads(wait_for(lambda: _read(os.path.join(self.out, "probe.json")), 60,
                                    "the probe's findings"))  # fmt: skip
        t0 = time.monotonic()
        self.b.run("kill", "probe-root", "--tree")
        kill_s = time.monotonic() - t0

        s = probe["snoop"]
        self.row("(c) processes visible in /proc from inside", s["pids"])
        self.row("(c) other sessions' tokens readable", len(s["tokens"]), "0", not s["tokens"])
        if s["token_callers"]:
            self.row("(c)   the stolen tokens spoke as", s["token_callers"], "", False)
        self.row(f"(c) foreign files readable (of {s['tried']} tried under BENCH_DIR)",
                 len(s["read"]), "0", not s["read"])  # fmt: skip
        for path in s["read"][:5]:
            self.row("(c)   read", os.path.relpath(path, self.b.dir), "", False)
        self.row("(c) a file planted in the victim's inbox", "yes" if s["planted"] else "no",
                 "no", not s["planted"])  # fmt: skip
        self.row("(c) BENCH_DIR as the agent sees it", " ".join(s["listing"]) or "(nothing)")
        for mode, what in probe["escape"].items():
            bad = "operator" in what or "/ok" in what
            self.row(f"(d) escaped child ({mode}) taken for", what, "never the operator", not bad)
        race = probe["race"]
        bad = sum(v for k, v in race.items() if "operator" in k or k.endswith(" ok"))
        self.row(f"(d) accept race: {self.args.race} tries taken for", _codes(race),
                 "never the operator", bad == 0)  # fmt: skip
        p = probe["pattern"]
        accepted = "accepted" if p["spawn_rc"] == 0 else f"refused: {p['spawn_err']}"
        self.row("(e) the '(a+)+$' job's spawn", f"{accepted} in {p['spawn_s']:.2f} s")
        med, mx, n = sampler.figures()
        lim = self.args.latency_limit * 1000
        self.row(f"(e) operator's hello while it ran, median / max ({n} calls)",
                 f"{med:.1f} / {mx:.1f} ms", f"max <= {lim:.0f} ms", n > 0 and mx <= lim)  # fmt: skip
        self.row("(e) its `kill --tree` from inside; the operator's of the probe tree",
                 f"{p['kill_s']:.2f} s; {kill_s:.2f} s")  # fmt: skip


def _codes(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def table(rows: list[tuple[str, str, str, bool]]) -> str:
    w0 = max(len(r[0]) for r in rows)
    w1 = min(max(len(r[1]) for r in rows), 64)
    lines = [f"{'figure':<{w0}}  {'value':<{w1}}  {'must be':<34}  verdict", "-" * (w0 + w1 + 48)]
    for figure, value, limit, held in rows:
        value = value if len(value) <= 64 else value[:61] + "..."
        verdict = "held" if held and limit else ("" if held else "BROKEN")
        lines.append(f"{figure:<{w0}}  {value:<{w1}}  {limit:<34}  {verdict}")
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m tools.proofs.hostile_trial",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seconds", type=float, default=60, help="(a)'s churn window (60)")
    p.add_argument("--flood-seconds", type=float, default=10, help="(b)'s flood window (10)")
    p.add_argument("--race", type=int, default=200, help="(d)'s accept-race tries (200)")
    p.add_argument("--hold", type=float, default=8, help="(e): seconds the pattern job runs (8)")
    p.add_argument("--latency-limit", type=float, default=1.0,
                   help="(e): the operator's slowest hello allowed, in seconds (1)")  # fmt: skip
    p.add_argument("--refusal-seconds", type=float, default=10,
                   help="(11): seconds one session loops refused waits (10)")  # fmt: skip
    p.add_argument("--only-rest", action="store_true",
                   help="only (11)-(16), the quick part (about a minute)")  # fmt: skip
    p.add_argument("--isolation", default="auto", choices=["auto", "required", "off"])
    p.add_argument("--keep", action="store_true", help="keep BENCH_DIR and the scratch dir")
    p.add_argument("daemon_opts", nargs="*", help="more `bench up` options (after --)")
    return p.parse_args(argv)


def first_parts(trial: Trial, args, secret: dict) -> None:
    """(a) to (g)."""
    for name, step in (("(a) churn", trial.churn), ("(b) flood", trial.flood)):
        print(f"- {name} ...", flush=True)
        step()
    print("- (c) snoop, (d) escape and race, (e) pattern ...", flush=True)
    trial.probe(secret["path"])
    attacks = SandboxAttacks(trial)
    for name, step in (
        ("(f) as root", attacks.root),
        ("(f) terminals", attacks.terminals),
        ("(g) another daemon", lambda: attacks.other_daemon(args.isolation)),
    ):
        print(f"- {name} ...", flush=True)
        step()


def main(argv=None) -> int:
    args = parse_args(argv)
    for k in [k for k in os.environ if k.startswith("BENCH_")]:
        del os.environ[k]  # inside a bench session, its token would be refused by our daemon
    out = tempfile.mkdtemp(prefix="bench-trial-", dir="/tmp")  # outside BENCH_DIR
    t0 = time.monotonic()
    try:
        with TempDaemon("--isolation", args.isolation, *args.daemon_opts, keep=args.keep) as b:
            trial = Trial(b, args, out)
            caps = trial.caps
            print(f"hostile-trial: daemon in {b.dir}; isolation {caps['isolation']}"
                  + (f" ({caps['isolation_note']})" if caps["isolation_note"] else ""), flush=True)  # fmt: skip
            b.run("spawn", "--name", "victim", "--", "sleep", "600")
            secret = b.run("mail", "send", "victim", "-m", "the victim's secret")
            trial.row("isolation", caps["isolation"], "", True)
            if not args.only_rest:
                first_parts(trial, args, secret)
            rest = RestAttacks(trial)
            for name, step in (
                ("(16) a wait on a reply to received mail", rest.wait_received),
                ("(12) a stranger's reply", rest.stranger),
                ("(11) refused waits in a loop", rest.refusals),
                ("(14), (15) team files", rest.team_files),
                ("(13) one tree's connections", lambda: rest.connections(args.isolation)),
            ):
                print(f"- {name} ...", flush=True)
                step()
            rows = trial.rows
    except ProofFailed as err:
        print(f"hostile-trial: FAILED: {err}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print()
    print(table(rows))
    broken = [r for r in rows if not r[3]]
    print()
    print(f"total {time.monotonic() - t0:.0f} s")
    if broken:
        names = list(dict.fromkeys(r[0].strip() for r in broken))
        print(f"hostile-trial: FAILED: {len(names)} attack(s) succeeded: " + "; ".join(names))
        return 1
    print("hostile-trial: ok: every attack held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
