"""A crash-tolerant sender: one client process of the crash loop and the load test.

    python -m tools.reliability.sender --dir BENCH_DIR --name c0 --out ACKS --to a,b \
        --stop STOPFILE [--seed N] [--max-seconds S] [--body-max N]

It connects with bench_wire.client and sends messages with unique keys (`<name>-<n>`) and
seeded bodies in a loop. Only after the daemon answered ok does it append the
acknowledged (key, mail_id, to, body) to its file as one JSON line, with flush and
fsync. A broken connection means "unknown": it reconnects (retrying with a short
backoff while no daemon answers) and resends the same key, so a message that did land
comes back as a duplicate with its first id. A refusal is recorded as an error line.
It stops when the stop file exists (after finishing the message in hand) or when
--max-seconds are up, and writes a summary line last.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from bench_wire.client import Client
from bench_wire.errors import WireError

PIECES = [
    "hello",
    "naïve café",
    "漢字かな",
    "😀🚀",
    "---",
    "---\n",
    "key: value",
    "\t",
    "  ",
    "\r\n",
    "\n",
    "\n\n",
    '"quoted"',
    "'single'",
    "#",
    "\\",
    "\x1b[31mred\x1b[0m",
    "\x00",
    "ü" * 7,
    "x" * 64,
    "line\nline",
    "{}",
    "[]",
    "%s",
    "$HOME",
    "`cmd`",
]


def make_body(rng: random.Random, body_max: int) -> str:
    if rng.random() < 0.03:
        return ""
    parts: list[str] = []
    size = rng.randint(1, body_max)
    while sum(len(p) for p in parts) < size:
        if rng.random() < 0.5:
            parts.append(rng.choice(PIECES))
        else:
            n = rng.randint(1, 40)
            parts.append("".join(chr(rng.randint(0x20, 0x7E)) for _ in range(n)))
    return "".join(parts)[:size]


class Acks:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        os.fsync(self.fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--to", required=True, help="comma-separated recipient handles")
    p.add_argument("--stop", required=True, help="stop once this file exists")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=300.0)
    p.add_argument("--body-max", type=int, default=600)
    p.add_argument("--reconnect-timeout", type=float, default=60.0)
    o = p.parse_args(argv)

    rng = random.Random(f"{o.seed}/{o.name}")
    recipients = o.to.split(",")
    acks = Acks(o.out)
    deadline = time.monotonic() + o.max_seconds
    conn: Client | None = None
    n = acked = unknown = errors = dups = 0
    max_latency = 0.0
    gave_up = False

    def connect() -> Client | None:
        nonlocal gave_up
        give_up_at = time.monotonic() + o.reconnect_timeout
        pause = 0.005
        while True:
            try:
                return Client(o.dir, timeout=30.0)
            except WireError:
                if time.monotonic() > give_up_at:
                    gave_up = True
                    return None
                time.sleep(pause)  # a client's retry backoff while the daemon restarts
                pause = min(pause * 2, 0.05)

    while not os.path.exists(o.stop) and time.monotonic() < deadline:
        key = f"{o.name}-{n:06d}"
        to = rng.choice(recipients)
        body = make_body(rng, o.body_max)
        req = {"verb": "mail/send", "to": to, "body": body, "subject": f"{o.name} #{n}", "key": key}
        tries = 0
        while True:
            if conn is None:
                conn = connect()
                if conn is None:
                    break
            tries += 1
            t0 = time.monotonic()
            try:
                conn.send(req)
                ans = conn.recv()
            except (WireError, OSError):
                unknown += 1  # the outcome is unknown: resend the same key
                conn.close()
                conn = None
                continue
            latency = time.monotonic() - t0
            if ans.get("ok") is True:
                max_latency = max(max_latency, latency)
                acked += 1
                dups += bool(ans.get("duplicate"))
                acks.write(
                    {
                        "key": key,
                        "mail_id": ans["mail_id"],
                        "to": to,
                        "body": body,
                        "dup": bool(ans.get("duplicate")),
                        "tries": tries,
                        "ms": round(latency * 1000, 2),
                    }
                )
            else:
                errors += 1
                acks.write({"error": ans.get("error"), "key": key, "to": to})
            break
        if gave_up:
            acks.write(
                {
                    "error": {"code": "gave-up", "message": "no daemon answered"},
                    "key": key,
                    "to": to,
                }
            )
            break
        n += 1
    if conn is not None:
        conn.close()
    acks.write(
        {
            "summary": {
                "name": o.name,
                "acked": acked,
                "unknown": unknown,
                "errors": errors + gave_up,
                "dups": dups,
                "max_ms": round(max_latency * 1000, 2),
            }
        }
    )
    return 1 if errors or gave_up else 0


if __name__ == "__main__":
    sys.exit(main())
