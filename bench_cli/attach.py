"""`bench attach`: the operator's terminal joined to a session's pty.

Raw mode, the window size forwarded (now and on SIGWINCH), Ctrl-] (0x1d) detaches.
The terminal is restored on every way out: detach, the session ending, the daemon
going away, an exception, or a signal.
"""

import base64
import os
import select
import signal
import sys
import termios
import tty

from bench_cli import output
from bench_wire.errors import WireError
from bench_wire.lean import Connection, check, request

DETACH = b"\x1d"  # Ctrl-]


def _size() -> tuple[int, int]:
    try:
        sz = os.get_terminal_size(sys.stdout.fileno())
        return sz.lines, sz.columns
    except OSError:
        return 40, 120


def attach(bench_dir: str | None, handle: str, as_json: bool = False) -> int:
    try:
        conn = Connection(bench_dir, timeout=None)
    except WireError as err:
        return output.fail(err, as_json)
    rows, cols = _size()
    try:
        conn.send(request("session/attach", {"handle": handle, "rows": rows, "cols": cols}))
        check(conn.recv())
    except WireError as err:
        conn.close()
        return output.fail(err, as_json)
    stdin = sys.stdin.fileno()
    is_tty = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if is_tty else None
    sys.stderr.write(f"[attached to {handle}; detach with Ctrl-]]\r\n")
    resized = []
    old_winch = signal.signal(signal.SIGWINCH, lambda *_: resized.append(1))
    reason = "detached"
    try:
        if is_tty:
            tty.setraw(stdin)
        sock = conn.sock
        while True:
            if resized:
                resized.clear()
                r, c = _size()
                conn.send(request("session/resize", {"rows": r, "cols": c}))
            try:
                ready, _, _ = select.select([stdin, sock], [], [])
            except InterruptedError:
                continue
            if stdin in ready:
                data = os.read(stdin, 4096)
                if not data:
                    conn.send(request("session/detach", {}))
                    break
                if DETACH in data:
                    before = data.split(DETACH, 1)[0]
                    if before:
                        conn.send(request("session/input", {"data": _b64(before)}))
                    conn.send(request("session/detach", {}))
                    break
                conn.send(request("session/input", {"data": _b64(data)}))
            if sock in ready:
                a = check(conn.recv())
                if a.get("type") == "output":
                    os.write(sys.stdout.fileno(), base64.b64decode(a["data"]))
                elif a.get("type") == "end":
                    reason = a.get("reason", "ended")
                    break
    except WireError as err:
        reason = err.message
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, old_winch)
        conn.close()
    sys.stderr.write(f"\r\n[{reason}]\n")
    return 0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
