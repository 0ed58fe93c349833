"""Runs inside a session's pty: sends raw requests as that session, records the answers.

    python inpty.py REQUESTS.json OUT.json [--stay] [--detach]

Each request is sent on one connection to $BENCH_DIR/benchd.sock exactly as given
(stdlib only: extra fields such as "from" reach the daemon untouched); a "token" of
"$TOKEN" is replaced by this session's BENCH_TOKEN. OUT.json gets the session's env
(handle, token) and every answer, written atomically once all are in. With --stay it
then waits for its stdin to close (the session is ended by the test). With --detach
the requests are sent by a child it starts in a new process session (setsid) without
BENCH_TOKEN in its environment: what a process can do to shed its session's identity.
"""

import json
import os
import socket
import subprocess
import sys


def main() -> int:
    reqs_path, out_path = sys.argv[1], sys.argv[2]
    if "--detach" in sys.argv:
        env = {k: v for k, v in os.environ.items() if k != "BENCH_TOKEN"}
        argv = [a for a in sys.argv if a not in ("--detach", "--stay")]
        subprocess.run(
            [sys.executable, *argv],
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            check=True,
        )
        if "--stay" in sys.argv:
            sys.stdin.read()
        return 0
    with open(reqs_path) as f:
        reqs = json.load(f)
    token = os.environ.get("BENCH_TOKEN", "")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(os.path.join(os.environ["BENCH_DIR"], "benchd.sock"))
    buf = b""
    answers = []
    for req in reqs:
        if req.get("token") == "$TOKEN":
            req["token"] = token
        s.sendall(json.dumps(req).encode() + b"\n")
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("the daemon closed the connection")
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        answers.append(json.loads(line))
    s.close()
    out = {
        "handle": os.environ.get("BENCH_HANDLE"),
        "token": token,
        "session": os.environ.get("BENCH_SESSION"),
        "answers": answers,
    }
    with open(out_path + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(out_path + ".tmp", out_path)
    if "--stay" in sys.argv:
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
