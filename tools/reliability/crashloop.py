"""The kill -9 crash loop shared by test_crash.py (3 rounds) and soak.py (N seconds).

Several sender processes (tools/reliability/sender.py) send mail with unique keys and
record every acknowledged message. The loop waits until some new acknowledgements
exist, lets the load run a random (seeded) extra moment — load shaping, not
synchronisation — then SIGKILLs the daemon and starts it again; the senders reconnect
and resend whatever was in flight under the same key. At the end `verify` checks, from
the files themselves and through the daemon:

- every acknowledged message is present exactly once, with its id, recipient and body
  byte for byte; no message exists that was never acknowledged (phantom)
- no file is left in any mail/*/tmp, and every file in inbox/ and read/ parses
- the event log parses apart from at most one torn line per crash, seq strictly
  increases over the whole file, and every acknowledged message has its mail/sent
- mail/list totals agree with the files (the index was recovered)
- resending every acknowledged key answers duplicate with the same id and writes nothing
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from bench_wire.client import Client
from tests.reliability.common import ROOT, scan_events, scan_mail
from tests.support.daemon import UNLIMITED, Benchd, short_tmpdir
from tests.support.wait import wait_for
from tools.reliability.flip import flip_random

RECIPIENTS = ("alice", "bob", "carol", "dave", "operator")


@dataclass
class Figures:
    rounds: int = 0  # kill -9s survived (the daemon came back each time)
    senders: int = 0
    acked: int = 0  # distinct acknowledged messages
    found: int = 0  # of those, found exactly once, intact
    lost: int = 0
    duplicates: int = 0  # extra copies of any message
    phantom: int = 0  # messages on disk never acknowledged
    corrupt: int = 0  # acknowledged but with a wrong id, recipient or body
    staged_left: int = 0
    stray_files: int = 0
    torn_lines: int = 0
    seq_errors: int = 0
    missing_events: int = 0
    double_events: int = 0
    list_mismatch: int = 0
    resent: int = 0
    resend_bad: int = 0
    resend_wrote: int = 0
    flips: int = 0  # committed journal records with a byte flipped (damage mode)
    damage_events: int = 0  # journal/damaged events logged
    named_lost: int = 0  # messages those events name as never written
    seq_reused: int = 0  # seqs that named one event before a restart and another after
    reconnects: int = 0  # sends whose outcome was unknown (connection broke) and were resent
    sender_errors: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self) -> str:
        lines = [
            f"kill -9 rounds survived: {self.rounds}",
            f"senders: {self.senders}",
            f"messages acknowledged: {self.acked}",
            f"acknowledged and found exactly once, intact: {self.found}",
            f"lost: {self.lost}",
            f"duplicates: {self.duplicates}",
            f"phantom (on disk, never acknowledged): {self.phantom}",
            f"corrupt (wrong id/recipient/body): {self.corrupt}",
            f"files left in tmp/: {self.staged_left}",
            f"stray or unparseable files: {self.stray_files}",
            f"torn event-log lines: {self.torn_lines} (allowed: {self.rounds})",
            f"seq errors: {self.seq_errors}",
            f"acknowledged without mail/sent: {self.missing_events}",
            f"journal records damaged (a byte flipped): {self.flips}",
            f"journal/damaged events: {self.damage_events} "
            f"(messages named as never written: {self.named_lost})",
            f"seq reused for another event: {self.seq_reused}",
            f"resent keys: {self.resent} (bad answers {self.resend_bad}, "
            f"files written {self.resend_wrote})",
            f"sends resent after a broken connection: {self.reconnects}",
            f"sender errors: {self.sender_errors}",
            f"elapsed: {self.seconds:.1f}s",
        ]
        if self.problems:
            lines.append(f"PROBLEMS ({len(self.problems)}):")
            lines += [f"  - {p}" for p in self.problems[:40]]
        return "\n".join(lines)


def _identity(e: dict) -> tuple:
    return (e.get("kind"), e.get("ts"), e.get("mail_id"), e.get("pid"))


def read_acks(path: str) -> tuple[list[dict], list[dict], list[dict]]:
    """(acks, errors, summaries) from one sender's file; a line still being written is
    skipped (only complete lines count)."""
    acks, errors, summaries = [], [], []
    if not os.path.exists(path):
        return acks, errors, summaries
    with open(path, "rb") as f:
        data = f.read()
    for line in data.split(b"\n")[:-1]:
        obj = json.loads(line)
        if "summary" in obj:
            summaries.append(obj["summary"])
        elif "error" in obj:
            errors.append(obj)
        else:
            acks.append(obj)
    return acks, errors, summaries


class CrashLoop:
    def __init__(
        self,
        senders: int = 4,
        seed: int = 1,
        bench_dir: str | None = None,
        work_dir: str | None = None,
        recipients=RECIPIENTS,
        body_max: int = 600,
        log=None,
        damage: bool = False,
    ):
        self.own_dirs = []
        if bench_dir is None:
            bench_dir = short_tmpdir("bc")
            self.own_dirs.append(bench_dir)
        if work_dir is None:
            work_dir = short_tmpdir("bw")
            self.own_dirs.append(work_dir)
        self.bench_dir, self.work_dir = bench_dir, work_dir
        self.n_senders = senders
        self.seed = seed
        self.rng = random.Random(seed)
        self.recipients = recipients
        self.body_max = body_max
        self.log = log or (lambda msg: None)
        self.daemon = Benchd(bench_dir, list(UNLIMITED))  # a durability run, not a limits one
        self.procs: list[subprocess.Popen] = []
        self.stop_file = os.path.join(work_dir, "STOP")
        self.figures = Figures(senders=senders)
        self.damage = damage  # flip a byte of a committed journal record at each kill
        self.seen: dict[int, tuple] = {}  # seq -> the event it named when first seen
        self.t0 = time.monotonic()

    # ------------------------------------------------------------ processes

    def ack_file(self, i: int) -> str:
        return os.path.join(self.work_dir, f"acks-{i}.jsonl")

    def start(self) -> None:
        self.daemon.start()
        env = self.daemon.env(PYTHONPATH=ROOT)
        for i in range(self.n_senders):
            cmd = [
                sys.executable,
                "-m",
                "tools.reliability.sender",
                "--dir",
                self.bench_dir,
                "--name",
                f"c{i}",
                "--out",
                self.ack_file(i),
                "--stop",
                self.stop_file,
                "--to",
                ",".join(self.recipients),
                "--seed",
                str(self.seed),
                "--body-max",
                str(self.body_max),
                "--max-seconds",
                "3600",
            ]
            self.procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )

    def acked_count(self) -> int:
        n = 0
        for i in range(self.n_senders):
            try:
                with open(self.ack_file(i), "rb") as f:
                    n += f.read().count(b'"mail_id"')
            except FileNotFoundError:
                pass
        return n

    def senders_alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def crash_round(self, min_new: int = 20, max_delay: float = 0.4, timeout: float = 60.0) -> None:
        """Wait for `min_new` more acknowledgements, a random moment more, kill -9, restart."""
        base = self.acked_count()

        def progressed():
            if not self.senders_alive():
                raise AssertionError(f"a sender died: {self.sender_stderr()}")
            return self.acked_count() >= base + min_new

        wait_for(progressed, timeout, f"{min_new} new acknowledgements")
        time.sleep(self.rng.uniform(0.0, max_delay))  # load shaping: kill at a random moment
        self.daemon.kill9()
        self.figures.rounds += 1
        self.remember_seqs()
        if self.damage:
            hit = flip_random(self.bench_dir, self.rng)
            if hit is not None:
                self.figures.flips += 1
                self.log(f"round {self.figures.rounds}: flipped {hit}")
        self.daemon.start()
        self.log(f"round {self.figures.rounds}: killed after {self.acked_count()} acks")

    def remember_seqs(self) -> None:
        """What each seq in the log names now (lines of a batch that never committed may
        be cut at the next start, but their seqs must never name another event)."""
        for e in scan_events(self.bench_dir).events:
            self.seen.setdefault(e["seq"], _identity(e))

    def stop_senders(self, timeout: float = 60.0) -> None:
        with open(self.stop_file, "w"):
            pass
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.figures.problems.append(f"sender pid {p.pid} did not stop in {timeout}s")
        for i, p in enumerate(self.procs):
            err = p.stderr.read() if p.stderr else ""
            if p.returncode != 0:
                self.figures.problems.append(f"sender c{i} exited {p.returncode}: {err[-2000:]}")

    def sender_stderr(self) -> str:
        out = []
        for i, p in enumerate(self.procs):
            if p.poll() is not None and p.stderr:
                out.append(f"c{i} rc={p.returncode}: {p.stderr.read()[-2000:]}")
        return "; ".join(out)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stderr:
                p.stderr.close()
        if self.daemon.proc is not None:
            self.daemon.stop()
        for d in self.own_dirs:
            shutil.rmtree(d, ignore_errors=True)

    # ------------------------------------------------------------ the loop

    def run(
        self,
        rounds: int | None = None,
        seconds: float | None = None,
        min_new: int = 20,
        max_delay: float = 0.4,
        tail_acks: int = 20,
    ) -> Figures:
        """Crash rounds (a count, or as many as fit in `seconds`), then verify."""
        self.start()
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if rounds is not None and self.figures.rounds >= rounds:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            self.crash_round(min_new, max_delay)
        # The senders carry on against the restarted daemon before they are stopped.
        base = self.acked_count()
        wait_for(
            lambda: self.acked_count() >= base + tail_acks or not self.senders_alive(),
            60,
            "acknowledgements after the last restart",
        )
        self.stop_senders()
        return self.verify()

    # ------------------------------------------------------------ verification

    def verify(self) -> Figures:
        f = self.figures
        P = f.problems
        acked: dict[str, dict] = {}
        for i in range(self.n_senders):
            acks, errors, summaries = read_acks(self.ack_file(i))
            f.sender_errors += len(errors)
            for e in errors[:5]:
                P.append(f"sender c{i} was refused: {e}")
            for s in summaries:
                f.reconnects += s["unknown"]
            for a in acks:
                prev = acked.get(a["key"])
                if prev is not None and prev["mail_id"] != a["mail_id"]:
                    P.append(
                        f"key {a['key']} acknowledged with two ids "
                        f"{prev['mail_id']} and {a['mail_id']}"
                    )
                acked.setdefault(a["key"], a)
        f.acked = len(acked)
        if not acked:
            P.append("no message was acknowledged at all")

        scan = scan_mail(self.bench_dir)
        f.staged_left = len(scan.staged)
        f.stray_files = len(scan.stray)
        if scan.staged:
            P.append(f"files left in tmp/: {scan.staged[:5]}")
        if scan.stray:
            P.append(f"stray or unparseable files in the mailroom: {scan.stray[:5]}")
        by_key = scan.by_key()
        for (sender, key), msgs in by_key.items():
            if len(msgs) > 1:
                f.duplicates += len(msgs) - 1
                P.append(
                    f"key {key} from {sender} is on disk {len(msgs)} times: "
                    f"{[m['path'] for m in msgs]}"
                )
            if sender == "operator" and key not in acked:
                f.phantom += 1
                P.append(f"message {msgs[0]['path']} (key {key}) was never acknowledged")
        for key, a in acked.items():
            msgs = by_key.get(("operator", key), [])
            if not msgs:
                f.lost += 1
                P.append(f"LOST: acknowledged {a['mail_id']} (key {key}) to {a['to']}")
                continue
            m = msgs[0]
            body = a["body"].encode("utf-8")
            if m["meta"]["id"] != a["mail_id"] or m["meta"]["to"] != a["to"] or m["body"] != body:
                f.corrupt += 1
                P.append(
                    f"acknowledged {a['mail_id']} (key {key}) differs on disk: "
                    f"{m['path']} id={m['meta']['id']} to={m['meta']['to']} "
                    f"body equal={m['body'] == body}"
                )
                continue
            if len(msgs) == 1:
                f.found += 1

        log = scan_events(self.bench_dir)
        for e in log.events:
            was = self.seen.get(e["seq"])
            if was is not None and was != _identity(e):
                f.seq_reused += 1
                if f.seq_reused <= 5:
                    P.append(f"seq {e['seq']} named {was} and now {_identity(e)}")
        for e in log.of_kind("journal/damaged"):
            f.damage_events += 1
            f.named_lost += len(e.get("lost", []))
        f.torn_lines = len(log.torn)
        f.seq_errors = len(log.seq_errors)
        if len(log.torn) > f.rounds:
            P.append(
                f"{len(log.torn)} unparseable event-log lines after {f.rounds} crashes: "
                f"{[t[:80] for t in log.torn[:5]]}"
            )
        P.extend(f"event log: {e}" for e in log.seq_errors[:5])
        sent: dict[str, list[dict]] = {}
        for e in log.of_kind("mail/sent"):
            sent.setdefault(e["mail_id"], []).append(e)
        for key, a in acked.items():
            evs = sent.get(a["mail_id"], [])
            live = [e for e in evs if not e.get("recovered")]
            if not evs:
                f.missing_events += 1
                P.append(f"acknowledged {a['mail_id']} (key {key}) has no mail/sent event")
            elif len(live) > 1:
                f.double_events += 1
                P.append(f"{a['mail_id']} has {len(live)} mail/sent events")
            elif not a["dup"] and a["tries"] == 1 and len(live) != 1:
                # Answered ok on its first try: its event was logged before that answer.
                f.missing_events += 1
                P.append(
                    f"{a['mail_id']} was acknowledged at once but its mail/sent is "
                    f"only a recovered one"
                )

        with Client(self.bench_dir) as c:
            for h in self.recipients:
                a = c.call({"verb": "mail/list", "handle": h, "state": "all", "limit": 1})
                if a["total"] != scan.count(h):
                    f.list_mismatch += 1
                    P.append(f"mail/list says {h} holds {a['total']}, the files {scan.count(h)}")
        self.resend_all(acked, scan)
        f.seconds = time.monotonic() - self.t0
        return f

    def resend_all(self, acked: dict[str, dict], before) -> None:
        """Resend every acknowledged key: duplicate, same id, nothing new on disk."""
        f = self.figures
        sent_before = len(scan_events(self.bench_dir).of_kind("mail/sent"))
        items = list(acked.values())
        with Client(self.bench_dir, timeout=60) as c:
            for start in range(0, len(items), 64):
                chunk = items[start : start + 64]
                for a in chunk:  # pipelined: a page of requests, then their answers
                    c.send({"verb": "mail/send", "to": a["to"], "body": a["body"], "key": a["key"]})
                for a in chunk:
                    ans = c.recv()
                    f.resent += 1
                    if not (
                        ans.get("ok")
                        and ans.get("duplicate") is True
                        and ans.get("mail_id") == a["mail_id"]
                    ):
                        f.resend_bad += 1
                        if f.resend_bad <= 5:
                            f.problems.append(f"resend of {a['key']} answered {ans}")
        after = scan_mail(self.bench_dir)
        f.resend_wrote = len(after.messages) - len(before.messages)
        if f.resend_wrote or after.staged:
            f.problems.append(
                f"resending wrote {f.resend_wrote} files ({len(after.staged)} in tmp/)"
            )
        sent_after = len(scan_events(self.bench_dir).of_kind("mail/sent"))
        if sent_after != sent_before:
            f.problems.append(f"resending logged {sent_after - sent_before} mail/sent events")
