"""Concurrent `bench up` on one directory: one daemon process, and no stray one after.

A trial once found that ten `bench up` started about nine daemons: the losers of the
race for benchd.lock were still starting when every `bench up` had exited 0, and one
started after `bench down` and the directory's removal made the directory again and
stayed. Now one `bench up` at a time starts a daemon (the directory's start lock).
"""

import json
import os
import shutil
import subprocess

from tests.conftest import BENCH, short_tmpdir, wait_for


def _benchd_pids(bench_dir: str) -> set[int]:
    """Every benchd process whose command line names `bench_dir`."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"benchd.server.app" in argv and bench_dir.encode() in argv:
            pids.add(int(entry))
    return pids


def test_ten_concurrent_ups_start_one_daemon_and_leave_none_behind():
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    bench_dir = short_tmpdir()
    shutil.rmtree(bench_dir)  # `bench up` makes it
    procs = [
        subprocess.Popen(
            [BENCH, "up", "--dir", bench_dir, "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(10)
    ]
    try:
        results = [(p.wait(90), *p.communicate()) for p in procs]
        assert [rc for rc, _o, _e in results] == [0] * 10, [r for r in results if r[0]]
        named = {json.loads(out)["pid"] for _rc, out, _e in results}
        # Every `bench up` has exited: what runs now is all that was started.
        running = _benchd_pids(bench_dir)
        assert running == named, (running, named)
        assert len(named) == 1
    finally:
        subprocess.run([BENCH, "down", "--dir", bench_dir], env=env, capture_output=True)
    shutil.rmtree(bench_dir, ignore_errors=True)
    wait_for(lambda: not _benchd_pids(bench_dir), 20, "no benchd process for the directory")
    assert not os.path.exists(bench_dir), "a process made the removed directory again"
