"""What the proofs share: running the real `bench` CLI, a temporary daemon, the timeline."""

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

from bench_cli import eventtext
from tests.support.daemon import BENCH, BIN
from tests.support.wait import wait_for as support_wait_for


class ProofFailed(Exception):
    """A deviation: the proof says why and exits non-zero."""


class Bench:
    """The real CLI against one BENCH_DIR."""

    def __init__(self, bench_dir: str):
        self.dir = bench_dir

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
        env["BENCH_DIR"] = self.dir
        env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
        return env

    def run(self, *args: str, check: bool = True) -> dict:
        at = args.index("--") if "--" in args else len(args)
        argv = [BENCH, *args[:at], "--json", *args[at:]]
        p = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        try:
            answer = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
        except json.JSONDecodeError:
            answer = {"ok": False, "error": {"code": "protocol", "message": p.stdout}}
        if check and p.returncode != 0:
            err = answer.get("error", {}).get("message") or p.stderr.strip()
            raise ProofFailed(f"`bench {' '.join(args)}` failed ({p.returncode}): {err}")
        return answer

    def text(self, *args: str) -> str:
        """The human output of a command (e.g. `tail H --screen`)."""
        p = subprocess.run(
            [BENCH, *args],
            capture_output=True,
            text=True,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        if p.returncode != 0:
            raise ProofFailed(f"`bench {' '.join(args)}` failed: {p.stderr.strip()}")
        return p.stdout

    def events(self, since: int = 0) -> list[dict]:
        argv = [BENCH, "events", "--after", str(since), "--json"]
        p = subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=60)
        if p.returncode != 0:
            raise ProofFailed(f"`bench events` failed: {p.stderr.strip()}")
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


class TempDaemon:
    """A fresh BENCH_DIR with its own daemon; removed again on exit (also on Ctrl-C)."""

    def __init__(self, *daemon_opts: str, keep: bool = False):
        self.dir = tempfile.mkdtemp(prefix="bench-proof-", dir="/tmp")
        self.bench = Bench(self.dir)
        self.opts = daemon_opts
        self.keep = keep

    def __enter__(self) -> Bench:
        self.bench.run("up", *self.opts)
        return self.bench

    def __exit__(self, *exc) -> None:
        try:
            self.bench.run("down", check=False)
        finally:
            if not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)


def standin_ring_args(name: str, nxt: str) -> list[str]:
    """`bench spawn` arguments for a stand-in ring agent called `name` that adds one to
    the number it is mailed and sends it on to `nxt`."""
    from tests.support.spawn import STANDIN

    return [
        "spawn",
        "--name",
        name,
        "--ready",
        "standin>",
        "--",
        sys.executable,
        STANDIN,
        "--ring",
        nxt,
    ]


def wait_for(fn, timeout: float, what: str):
    """Poll fn until it returns something truthy; ProofFailed naming `what` at the deadline."""
    return support_wait_for(fn, timeout, what, error=ProofFailed, pause=0.02, max_pause=0.25)


def timeline(events: list[dict], kinds: set[str] | None = None) -> str:
    """The event trail as a readable timeline, times relative to the first event shown."""
    shown = [e for e in events if kinds is None or e["kind"] in kinds]
    if not shown:
        return "(no events)"
    t0 = shown[0]["ts"]
    out = []
    for e in shown:
        rel = (e["ts"] - t0) / 1000
        k = e["kind"]
        if k == "mail/sent":
            what = f"{e['from']} -> {e['to']}  {e['mail_id']}"
        elif k == "agent/woken":
            what = f"{e['handle']} woken: {os.path.basename(e['path'] or '')}"
            if e.get("digest"):
                what = f"{e['handle']} woken with a digest of {e['digest']}"
        elif k == "mail/read":
            what = f"{e['reader']} read {e['mail_id']} from {e['handle']}'s mailbox"
        elif k == "wake/enter-retried":
            what = f"{e['handle']}: Enter pressed again (attempt {e['attempt']})"
        elif k in ("session/spawned", "session/exited"):
            what = f"{e['handle']} ({e['session']})"
        else:
            what = " ".join(  # as `bench events` and the dashboard show them
                f"{eventtext.label(a)}={eventtext.field(a, b)}"
                for a, b in eventtext.fields(e, ("seq", "ts", "kind"))
            )
        stamp = f"+{rel:.3f}s"
        out.append(f"  {stamp:>10}  {k:<20} {what}")
    return "\n".join(out)


def mail_states(bench: Bench, mail_ids: list[str]) -> list[dict]:
    """`bench mail status` of each message, as the operator (who may see all) sees it."""
    return [bench.run("mail", "status", mail_id) for mail_id in mail_ids]


def _utc_ms(at: str) -> int:
    """A state's time (`2026-12-02T06:49:59.123Z`) as milliseconds since the epoch."""
    when = datetime.datetime.fromisoformat(at.replace("Z", "+00:00"))
    return round(when.timestamp() * 1000)


def states_text(statuses: list[dict], t0_ms: int) -> str:
    """Each message's delivery states, its times relative to t0_ms (the trail's first
    event, so the two line up): a head line `FROM -> TO  ID  STATE` (the state shown now),
    then one line a state reached."""
    out = []
    for a in statuses:
        out.append(f"  {a['from'] + ' -> ' + a['to']:<20} {a['mail_id']}  {a['state']}")
        # in time order, as the trail above (`bench mail status` lists them by rank)
        for s in sorted(a["states"], key=lambda s: _utc_ms(s["at"])):
            extra = ", ".join(
                f"{k} {s[k]}"
                for k in ("reason", "until", "by", "reader", "reply", "node")
                if s.get(k)
            )
            stamp = f"+{(_utc_ms(s['at']) - t0_ms) / 1000:.3f}s"
            out.append(f"    {stamp:>10}  {s['state']:<10} {extra}".rstrip())
    return "\n".join(out)


def state_of(status: dict, state: str) -> dict | None:
    """The mark of `state` in a `bench mail status` answer, None when it was not reached."""
    return next((s for s in status["states"] if s["state"] == state), None)
