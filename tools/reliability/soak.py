"""Soak: the kill -9 crash loop for a bounded time, with figures.

    python -m tools.reliability.soak --seconds 300 [--senders 4] [--seed 1] [--damage]

Runs as many kill -9 rounds as fit in the time (each waits for fresh acknowledgements,
then kills the daemon at a random, seeded moment and restarts it), then verifies every
acknowledged message (see tools/reliability/crashloop.py). With --damage, each round
also flips a random bit of a random committed journal record between the kill and the
restart; every acknowledged message must still be present once, with its event, and
no seq may name two events. Prints the figures and exits
1 on any loss, duplicate or other problem, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

from tools.reliability.crashloop import CrashLoop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="soak", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300.0, help="how long to crash (s)")
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument(
        "--min-acks", type=int, default=20, help="fresh acknowledgements required before each kill"
    )
    p.add_argument(
        "--max-delay",
        type=float,
        default=0.5,
        help="upper bound of the random extra moment before each kill (s)",
    )
    p.add_argument(
        "--damage",
        action="store_true",
        help="journal-damage mode: after each kill -9, flip a random bit of a random "
        "committed journal record before the restart",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    o = p.parse_args(argv)
    log = (lambda msg: print(msg, flush=True)) if o.verbose else None
    mode = ", journal damage" if o.damage else ""
    print(f"soak: {o.seconds:.0f}s, {o.senders} senders, seed {o.seed}{mode}", flush=True)
    loop = CrashLoop(senders=o.senders, seed=o.seed, log=log, damage=o.damage)
    try:
        figures = loop.run(seconds=o.seconds, min_new=o.min_acks, max_delay=o.max_delay)
    finally:
        loop.close()
    print(figures.report())
    bad = figures.lost or figures.duplicates or figures.seq_reused or not figures.ok
    print("soak: FAILED" if bad else "soak: OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
