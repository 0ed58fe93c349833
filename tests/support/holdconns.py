"""Runs inside a session: opens connections to the daemon and holds them.

    python holdconns.py N OUT.json

Each of N connections sends a hello and reads its answer: admitted (the hello's
answer) or refused (too-many-connections, said at once on accept). OUT.json gets the
counts, written atomically once all are in; then the admitted connections are held
open until the process is killed (the test ends the session, or its daemon).
"""

import json
import os
import signal
import socket
import sys


def main() -> int:
    n, out = int(sys.argv[1]), sys.argv[2]
    path = os.path.join(os.environ["BENCH_DIR"], "benchd.sock")
    held, codes = [], []
    for i in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        try:
            s.connect(path)
            s.sendall(json.dumps({"verb": "hello", "id": i}).encode() + b"\n")
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            a = json.loads(buf.split(b"\n", 1)[0]) if buf else {}
        except OSError as err:
            codes.append(f"oserror:{err.errno}")
            continue
        if a.get("ok"):
            held.append(s)
            codes.append("ok")
        else:
            codes.append(a.get("error", {}).get("code", "closed"))
    with open(out + ".tmp", "w") as f:
        json.dump({"codes": codes}, f)
    os.replace(out + ".tmp", out)
    while held:
        signal.pause()  # hold them until killed
    return 0


if __name__ == "__main__":
    sys.exit(main())
