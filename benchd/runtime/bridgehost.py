"""`benchd --bridge URL` (`bench up --bridge URL`): run `bench bridge` as a child and
restart it when it exits, with backoff. The bridge stays its own process (asyncio and
nats-py never enter the trio daemon); its output goes to BENCH_DIR/bridge.out.
"""

import os
import subprocess
import sys

import trio

from bench_wire.errors import EXIT_USAGE
from benchd.runtime.logs import Log

RESTART_MOST = 30.0
STEADY = 60.0  # a bridge that ran this long gets a fresh backoff when it exits


async def supervise(
    bench_dir: str,
    node: str,
    url: str,
    helper_pids: set[int],
    log: Log,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`helper_pids` is the daemon's set of its own children acting for the operator."""
    task_status.started()
    argv = [
        sys.executable,
        "-m",
        "bench_cli.entry",
        "bridge",
        "--dir",
        bench_dir,
        "--nats",
        url,
        "--node",
        node,
    ]
    delay = 1.0
    while True:
        started = trio.current_time()
        # Opening a local log file for append does not block in any way that matters.
        with open(os.path.join(bench_dir, "bridge.out"), "ab") as out:  # noqa: ASYNC230
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        # The bridge is a client of this daemon acting for the operator: identity must
        # not take it for a process that left a session, nor the orphan reaper collect it.
        helper_pids.add(proc.pid)
        try:
            await proc.wait()
        finally:
            helper_pids.discard(proc.pid)
            if proc.returncode is None:
                proc.kill()
        log.warning("bridge exited", code=proc.returncode)
        if proc.returncode == EXIT_USAGE:
            log.error("bridge refused its options; not restarted (see bridge.out)")
            return
        if trio.current_time() - started > STEADY:
            delay = 1.0
        await trio.sleep(delay)
        delay = min(delay * 2, RESTART_MOST)
