"""Fill a mailbox through a running daemon from several client processes.

One Python process with 32 client threads spends most of its time handing the GIL
around and filled at about a third of what the daemon takes. Several processes, each
with a few threads and its own connections, keep the daemon's batches full instead. The
fill still goes through `mail/send` on the real daemon, message by message, each one
durable before its answer. The messages are tools/perf/corpus.py's.

    python -m tools.perf.fill BENCH_DIR HANDLE FIRST COUNT TOTAL THREADS   (one worker)
"""

import subprocess
import sys

from bench_wire.client import Client, request
from tools.perf import corpus
from tools.perf.harness import PY, ROOT, call, clean_env, now_ns, run_threads


def fill(bench_dir: str, to: str, total: int, procs: int, threads: int) -> int:
    """Messages 0..total-1 of the corpus of `total` sent to `to` from `procs` processes of
    `threads` clients each; returns the ns from launching the first process to the last
    one's exit."""
    shares = [total // procs + (1 if i < total % procs else 0) for i in range(procs)]
    firsts = [sum(shares[:i]) for i in range(procs)]
    env = clean_env(bench_dir)
    t0 = now_ns()
    workers = [
        subprocess.Popen(
            [PY, "-m", "tools.perf.fill", bench_dir, to, str(first), str(count), str(total)]
            + [str(threads)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for first, count in zip(firsts, shares, strict=True)
        if count
    ]
    failed = []
    for w in workers:
        _, err = w.communicate()
        if w.returncode != 0:
            failed.append(err.decode(errors="replace")[-2000:])
    took = now_ns() - t0
    if failed:
        raise RuntimeError(f"{len(failed)} fill worker(s) failed: {failed[0]}")
    return took


def send_range(bench_dir: str, to: str, first: int, count: int, total: int, threads: int):
    """Messages first..first+count-1 from `threads` clients, one connection each."""
    corpus.planted(total)  # made once, before the threads start

    def client(t: int):
        conn = Client(bench_dir, timeout=120.0)
        call(conn, "hello")
        yield
        try:
            for i in range(first + t, first + count, threads):
                subject, body = corpus.message(i, total)
                conn.call(request("mail/send", {"to": to, "body": body, "subject": subject}))
        finally:
            conn.close()

    run_threads(threads, client)


def main(argv: list[str]) -> int:
    bench_dir, to, first, count, total, threads = argv
    send_range(bench_dir, to, int(first), int(count), int(total), int(threads))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
