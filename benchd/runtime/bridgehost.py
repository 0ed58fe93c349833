"""`benchd --bridge URL` (`bench up --bridge URL`): run `bench bridge` as a child and
restart it when it exits, with backoff. The bridge stays its own process (asyncio and
nats-py never enter the trio daemon); its output goes to BENCH_DIR/bridge.out.
"""

import os
import subprocess
import sys

import trio

from bench_wire.errors import EXIT_USAGE

RESTART_MOST = 30.0
STEADY = 60.0  # a bridge that ran this long gets a fresh backoff when it exits


async def supervise(daemon, url: str) -> None:
    argv = [
        sys.executable,
        "-m",
        "bench_cli.entry",
        "bridge",
        "--dir",
        daemon.bench_dir,
        "--nats",
        url,
        "--node",
        daemon.outbound.node,
    ]
    delay = 1.0
    while True:
        started = trio.current_time()
        # Opening a local log file to append is as quick as a stat; no thread needed.
        with open(os.path.join(daemon.bench_dir, "bridge.out"), "ab") as out:  # noqa: ASYNC230
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        # The bridge is a client of this daemon acting for the operator: identity must
        # not take it for a process that left a session, nor the orphan reaper collect it.
        daemon.helper_pids.add(proc.pid)
        try:
            await proc.wait()
        finally:
            daemon.helper_pids.discard(proc.pid)
            if proc.returncode is None:
                proc.kill()
        daemon.log.warning("bridge exited", code=proc.returncode)
        if proc.returncode == EXIT_USAGE:
            daemon.log.error("bridge refused its options; not restarted (see bridge.out)")
            return
        if trio.current_time() - started > STEADY:
            delay = 1.0
        await trio.sleep(delay)
        delay = min(delay * 2, RESTART_MOST)
