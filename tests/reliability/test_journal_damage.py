"""One flipped byte in a committed journal record costs that record alone, and loudly.

Real daemon, real sender processes, a real kill -9: then one byte of a record in the
middle of the journal is flipped on disk, as a bad sector would leave it, and the
daemon is started again. Every acknowledged message must be there once, with its
mail/sent event; no seq may name another event than before; the damage is named in a
journal/damaged event, in benchd.log and in `bench status` until acknowledged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchd.store.journal import HEAD_BYTES
from tests.reliability.common import ROOT, scan_events, scan_mail
from tests.support.daemon import Benchd
from tests.support.wait import wait_for
from tools.reliability.crashloop import _identity, read_acks
from tools.reliability.flip import committed_records, flip_byte

SENDERS = 4


def start_senders(d: Benchd, work: str) -> list[subprocess.Popen]:
    procs = []
    for i in range(SENDERS):
        cmd = [
            sys.executable,
            "-m",
            "tools.reliability.sender",
            *("--dir", d.dir, "--name", f"c{i}", "--out", os.path.join(work, f"acks-{i}")),
            *("--stop", os.path.join(work, "STOP"), "--to", "alice,bob,carol"),
            *("--seed", "22", "--reconnect-timeout", "1", "--max-seconds", "600"),
        ]
        env = d.env(PYTHONPATH=ROOT)
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL))
    return procs


def acked(work: str) -> dict[str, dict]:
    out = {}
    for i in range(SENDERS):
        acks, _errors, _summaries = read_acks(os.path.join(work, f"acks-{i}"))
        out.update((a["key"], a) for a in acks)
    return out


def test_a_flipped_byte_in_a_middle_record_loses_nothing_acknowledged(bench_dir, tmp_path):
    work = str(tmp_path)
    d = Benchd(bench_dir, [])
    d.start()
    procs = start_senders(d, work)
    try:
        wait_for(lambda: len(acked(work)) >= 200, 120, "200 acknowledged sends")
        d.kill9()  # under load: the senders are mid-send
    finally:
        open(os.path.join(work, "STOP"), "w").close()
        for p in procs:
            p.wait(60)
    before = {e["seq"]: _identity(e) for e in scan_events(bench_dir).events}
    recs = committed_records(bench_dir)
    assert len(recs) >= 5, f"only {len(recs)} journal records to damage"
    segment, rec = recs[len(recs) // 2]
    flip_byte(bench_dir, segment, rec.offset + HEAD_BYTES + len(rec.payload) // 2)

    d.start()
    try:
        sent = acked(work)
        by_key = scan_mail(bench_dir).by_key()
        for key, a in sent.items():
            msgs = by_key.get(("operator", key), [])
            assert len(msgs) == 1 and msgs[0]["meta"]["id"] == a["mail_id"], (key, msgs)
        log = scan_events(bench_dir)
        assert log.seq_errors == []
        announced = {e["mail_id"] for e in log.of_kind("mail/sent")}
        assert {a["mail_id"] for a in sent.values()} <= announced
        reused = [
            e["seq"] for e in log.events if before.get(e["seq"], _identity(e)) != _identity(e)
        ]
        assert reused == []
        # Only the lines of the batch the kill cut short (never answered) are taken
        # back, and their seqs are not handed out again.
        kept = {e["seq"] for e in log.events}
        cut = set(before) - kept
        assert all(s > max(set(before) - cut) for s in cut), sorted(cut)
        assert min(kept - set(before)) > max(before)

        dmg = d.wait_event("journal/damaged")
        assert dmg["segment"] == segment and dmg["offset"] == rec.offset, dmg
        # `lost` names messages as the damaged bytes read (an id the flip hit reads as
        # another): none of them may be an acknowledged one, all of which are present.
        lost = {x.split("/", 1)[1] for x in dmg["lost"]}
        assert dmg["in_log"] is True and dmg["held"], dmg
        assert not lost & {a["mail_id"] for a in sent.values()}, dmg
        with open(os.path.join(bench_dir, "benchd.log")) as f:
            lines = [json.loads(line) for line in f if '"journal damaged"' in line]
        assert [(x["segment"], x["offset"]) for x in lines] == [(segment, rec.offset)]
        r = d.bench("status")
        assert r.rc == 0 and "DAMAGED" in r.out and f"{segment} offset {rec.offset}" in r.out, r
        d.restart()
        assert "DAMAGED" in d.bench("status").out  # until acknowledged
        r = d.bench("status", "--ack")
        assert r.rc == 0 and "DAMAGED" not in r.out, r
        d.restart()
        assert "DAMAGED" not in d.bench("status").out
        assert d.wait_event("journal/damaged")["offset"] == rec.offset  # the log keeps it
    finally:
        d.stop()
