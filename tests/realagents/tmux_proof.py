"""Drive one real agent in tmux against the scripted model server and record what happens.

``python -m tests.realagents.tmux_proof [claude|pi|codex ...] [--enter-delay S] [--settle S]
[--mode keys|paste|bracketed] [--keep]`` prints one JSON report per agent.

Each run: a private tmux server (``tmux -S <work>/tmux.sock``), a throwaway HOME, a fake
``bench`` first on PATH (appends its argv to a log), a mail file
``<tmp>/mail/alice/read/1.md`` holding ``number 100``, the ring ``alice=bob``. The
line ``You have mail from operator: <path>`` is typed once the ready regex holds and
the settle delay passed; the proof holds when the fake bench logs
``mail send bob -m number 101``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.realagents import agents
from tests.realagents.model_server import start_server

TMUX = "/usr/bin/tmux"
MAIL = """---
id: 20250101T000000000Z-0001
from: operator
to: alice
subject: "count: 7 -- go"
date: 2025-01-01T00:00:00.000Z
key: k-42
---

number 100
"""
FAKE_BENCH = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
echo "sent (fake bench)"
"""


MODES = ["keys", "paste", "bracketed", "oneshot", "bracketed-oneshot"]


class Tmux:
    def __init__(self, socket: Path) -> None:
        self.socket = socket  # a socket path (-S): it goes away with the work dir

    def run(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(
            [TMUX, "-S", str(self.socket), "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if check and r.returncode != 0:
            raise RuntimeError(f"tmux {args[:2]} failed: {r.stderr.strip()}")
        return r.stdout

    def screen(self, target: str) -> str:
        return self.run("capture-pane", "-p", "-t", target, check=False)

    def alt_on(self, target: str) -> bool:
        return (
            self.run("display", "-p", "-t", target, "#{alternate_on}", check=False).strip() == "1"
        )

    def kill_server(self) -> None:
        self.run("kill-server", check=False)


def _wait(pred, timeout: float, step: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def prove(
    kind: str,
    bin_dir: Path,
    work: Path,
    *,
    enter_delay: float | None = None,
    settle: float | None = None,
    mode: str = "keys",
    ready_timeout: float = 60.0,
    done_timeout: float = 60.0,
    wait_ready: bool = True,
) -> dict:
    """Run one agent end to end; return observations (never raises on a failed proof)."""
    work.mkdir(parents=True, exist_ok=True)
    mail = work / "mail" / "alice" / "read" / "1.md"
    mail.parent.mkdir(parents=True, exist_ok=True)
    mail.write_text(MAIL, encoding="utf-8")
    fake_dir = work / "fakebin"
    fake_dir.mkdir(exist_ok=True)
    bench_log = work / "bench.log"
    bench_log.write_text("")
    (fake_dir / "bench").write_text(FAKE_BENCH.format(log=shlex.quote(str(bench_log))))
    (fake_dir / "bench").chmod(0o755)
    cwd = work / "project"
    cwd.mkdir(exist_ok=True)
    model_log = work / "model.jsonl"
    server, port = start_server({"alice": "bob"}, model_log)
    spec = agents.prepare(kind, work / "home", port, cwd, bin_dir, extra_path=[fake_dir])
    enter_delay = spec.enter_delay if enter_delay is None else enter_delay
    settle = spec.settle if settle is None else settle
    raw = work / "raw.out"
    tmux = Tmux(work / "tmux.sock")
    target = "agent"
    envs = [f"{k}={v}" for k, v in spec.env.items()]
    cmd = "exec " + shlex.join(["env", "-i", *envs, *spec.argv])
    report: dict = {"kind": kind, "argv": spec.argv, "mode": mode}
    report.update(enter_delay=enter_delay, settle=settle, work=str(work))
    t0 = time.monotonic()
    try:
        tmux.run(
            "new-session", "-d", "-s", target, "-x", "160", "-y", "48", "-c", str(cwd), cmd,
            ";", "set-option", "-t", target, "remain-on-exit", "on",
            ";", "pipe-pane", "-t", target, f"cat >> {shlex.quote(str(raw))}",
        )  # fmt: skip
        if wait_ready:
            seen = _wait(lambda: spec.ready_re.search(tmux.screen(target)), ready_timeout)
        else:  # experiment: type as soon as the pane shows anything at all
            seen = _wait(lambda: re.search(r"\S", tmux.screen(target)), ready_timeout)
        t_ready = time.monotonic() - t0
        report["ready"] = bool(seen)
        report["ready_s"] = round(t_ready, 2)
        report["ready_match"] = seen.group(0) if seen else None
        report["screen_at_ready"] = tmux.screen(target)
        report["alt_screen"] = tmux.alt_on(target)
        if not seen:
            return report
        time.sleep(settle)
        line = f"You have mail from operator: {mail}"
        t_type = time.monotonic()
        if mode == "keys":
            tmux.run("send-keys", "-t", target, "-l", line)
        elif mode == "bracketed":
            tmux.run("send-keys", "-t", target, "-l", f"\x1b[200~{line}\x1b[201~")
        elif mode == "paste":  # tmux wraps in bracketed paste iff the app asked for it
            tmux.run("set-buffer", "-b", "wake", line)
            tmux.run("paste-buffer", "-p", "-d", "-b", "wake", "-t", target)
        elif mode == "oneshot":  # text and Enter in one write (known bad: for the record)
            tmux.run("send-keys", "-t", target, "-l", line + "\r")
        elif mode == "bracketed-oneshot":
            tmux.run("send-keys", "-t", target, "-l", f"\x1b[200~{line}\x1b[201~\r")
        else:
            raise ValueError(mode)
        if "oneshot" not in mode:
            time.sleep(enter_delay)
            tmux.run("send-keys", "-t", target, "Enter")
        t_enter = time.monotonic()
        # Did the turn start? (Enter retry, never the text.)
        retries = 0
        while retries < 3:
            started = _wait(lambda: _submitted(model_log, line), 2.0)
            if started:
                break
            retries += 1
            tmux.run("send-keys", "-t", target, "Enter")
        report["enter_retries"] = retries
        got = _wait(lambda: bench_log.read_text().strip(), done_timeout)
        report["bench_argv"] = got
        report["enter_to_tool_s"] = round(time.monotonic() - t_enter, 2) if got else None
        report["type_to_tool_s"] = round(time.monotonic() - t_type, 2) if got else None
        report["proof"] = got == "mail send bob -m number 101"
        done = _wait(lambda: re.search(r"\bdone\b", tmux.screen(target)), 15)
        report["final_text_on_screen"] = bool(done)
        report["screen_at_end"] = tmux.screen(target)
        report["alt_screen_at_end"] = tmux.alt_on(target)
    finally:
        tmux.kill_server()
        server.shutdown()
        server.server_close()
        raw_bytes = raw.read_bytes() if raw.exists() else b""
        report["bracketed_paste_on"] = b"\x1b[?2004h" in raw_bytes
        report["bracketed_paste_off_after"] = raw_bytes.rfind(b"\x1b[?2004l") > raw_bytes.rfind(
            b"\x1b[?2004h"
        )
        report["alt_screen_seq"] = b"\x1b[?1049h" in raw_bytes
        report["requests"] = _summarise(model_log)
    return report


def _submitted(model_log: Path, line: str) -> bool:
    """The agent sent the line to the model, i.e. Enter submitted it."""
    return model_log.exists() and json.dumps(line)[1:-1] in model_log.read_text()


def _summarise(model_log: Path) -> list[dict]:
    out = []
    if not model_log.exists():
        return out
    for raw in model_log.read_text().splitlines():
        r = json.loads(raw)
        body = r.get("body") if isinstance(r.get("body"), dict) else {}
        tools = [agents_tool_name(t) for t in body.get("tools") or []]
        out.append(
            {
                "method": r["method"],
                "path": r["path"],
                "stream": body.get("stream"),
                "model": body.get("model"),
                "n_tools": len(tools),
                "shell_tools": [t for t in tools if t in ("Bash", "bash", "exec_command", "shell")],
                "reply": r.get("reply"),
            }
        )
    return out


def agents_tool_name(t: dict) -> str:
    if isinstance(t.get("function"), dict):
        return t["function"].get("name", "")
    return t.get("name") or t.get("type", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.realagents.tmux_proof")
    ap.add_argument("kinds", nargs="*", default=list(agents.KINDS))
    ap.add_argument("--enter-delay", type=float)
    ap.add_argument("--settle", type=float)
    ap.add_argument("--mode", default="keys", choices=MODES)
    ap.add_argument("--keep", action="store_true", help="keep the work dirs")
    ap.add_argument("--screens", action="store_true", help="print the captured screens")
    args = ap.parse_args(argv)
    bin_dir = agents.ensure_installed()
    ok = True
    for kind in args.kinds:
        work = Path(tempfile.mkdtemp(prefix=f"realagent-{kind}-"))
        rep = prove(kind, bin_dir, work, enter_delay=args.enter_delay, settle=args.settle,
                    mode=args.mode)  # fmt: skip
        ok = ok and bool(rep.get("proof"))
        if not args.screens:
            rep.pop("screen_at_ready", None)
            rep.pop("screen_at_end", None)
        print(json.dumps(rep, indent=1), flush=True)
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
