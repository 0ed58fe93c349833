"""A child job of `just delegate-proof`: it reads its task and reports the answer.

The task is one line, `add A B`: the child reads it from its own mailbox (`bench mail
read`), records `A + B = SUM` with `bench report` and exits 0, so its job settles
`completed`. With `--hang` it reports `working` and then waits to be killed (or for
its deadline); with `--stall` it prints `working` without a report and then shows
nothing more: after its stall time the daemon mails its spawner that it stalled.
"""

import json
import subprocess
import sys
import time


def bench(*args: str) -> dict:
    p = subprocess.run(["bench", *args, "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise SystemExit(f"bench {' '.join(args)} failed: {p.stdout}{p.stderr}")
    return json.loads(p.stdout)


def main(argv: list[str]) -> int:
    task = bench("mail", "read")["body"].strip()
    if "--stall" in argv:
        print("working, and soon silent", flush=True)
        while True:
            time.sleep(3600)  # no report, no output: a stall
    if "--hang" in argv:
        bench("report", "working on: " + task)
        print("working", flush=True)
        while True:
            time.sleep(3600)  # until its spawner ends it
    words = task.split()
    if len(words) != 3 or words[0] != "add":
        bench("report", f"I cannot do {task!r}")
        return 1
    a, b = int(words[1]), int(words[2])
    bench("report", f"{a} + {b} = {a + b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
