"""`bench attach`: the operator's terminal joined to a session's pty, in raw mode, its
size forwarded; restored on every way out (docs/cli.md). Exit 0 when detached or the
session ended, 4 when the connection broke."""

import base64
import os
import select
import signal
import sys
import termios
import tty
from types import FrameType

from bench_cli import output
from bench_cli.context import connect
from bench_wire import messages as m
from bench_wire.client import Client, Stream
from bench_wire.errors import EXIT_OK, EXIT_PROTOCOL, WireError
from bench_wire.untrusted import escape

DETACH = b"\x1d"  # Ctrl-]


class _Stop(Exception):
    """A terminating signal arrived: leave through the finally that restores the tty."""


def _size() -> tuple[int, int]:
    try:
        sz = os.get_terminal_size(sys.stdout.fileno())
        return sz.lines, sz.columns
    except OSError:
        return 40, 120


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def attach(bench_dir: str | None, handle: str, as_json: bool = False) -> int:
    try:
        conn = connect(bench_dir, timeout=None)
    except WireError as err:
        return output.fail(err, as_json)
    rows, cols = _size()
    try:
        frames = conn.stream(m.SessionAttach(handle=handle, rows=rows, cols=cols))
        next(frames)  # AttachOk: joined (a refusal is raised)
    except (WireError, StopIteration) as err:
        conn.close()
        if isinstance(err, StopIteration):  # ended before it began: the session is gone
            err = WireError("protocol", "the daemon ended the attach before it began")
        return output.fail(err, as_json)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    saved = termios.tcgetattr(stdin) if os.isatty(stdin) else None
    # Signals wake select() through this pipe (PEP 475 would otherwise retry it).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    resized: list[int] = []

    def on_stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop()

    old = {
        signal.SIGWINCH: signal.signal(signal.SIGWINCH, lambda *_: resized.append(1)),
        signal.SIGTERM: signal.signal(signal.SIGTERM, on_stop),
        signal.SIGHUP: signal.signal(signal.SIGHUP, on_stop),
    }
    reason, code = "detached", EXIT_OK
    try:
        if saved is not None:
            tty.setraw(stdin)
        # The banner comes last: once it is out, raw mode and the signal
        # handlers are in place (a test, or a user, may act on seeing it).
        sys.stderr.write(f"[attached to {escape(handle)}; detach with Ctrl-]]\r\n")
        sys.stderr.flush()
        reason = _relay(conn, frames, stdin, stdout, wake_r, resized)
    except _Stop:
        reason = "stopped by a signal"
    except WireError as err:
        reason, code = err.message, EXIT_PROTOCOL
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(wake_r)
        os.close(wake_w)
        conn.close()
    # The daemon's words, which may quote someone's text: escaped, as all our own output
    # on a terminal is (the session's stream above is its own, and passes unchanged).
    sys.stderr.write(f"\r\n[{escape(reason)}]\n")
    return code


def _relay(
    conn: Client,
    frames: Stream[m.AttachOk | m.OutputFrame],
    stdin: int,
    stdout: int,
    wake_r: int,
    resized: list[int],
) -> str:
    """Keystrokes to the session, output to the terminal; returns why it ended."""
    sock = conn.sock.fileno()  # select() on plain fds: one type in the list
    while True:
        if resized:
            resized.clear()
            r, c = _size()
            conn.send(m.SessionResize(rows=r, cols=c))
        # Frames already read into the buffer first: select() cannot see them.
        while frames.pending():
            why = _frame(frames, stdout)
            if why:
                return why
        ready, _, _ = select.select([stdin, sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 512)
        if stdin in ready:
            data = os.read(stdin, 4096)
            if not data:
                conn.send(m.SessionDetach())
                return "detached"
            if DETACH in data:
                before = data.split(DETACH, 1)[0]
                if before:
                    conn.send(m.SessionInput(data=_b64(before)))
                conn.send(m.SessionDetach())
                return "detached"
            conn.send(m.SessionInput(data=_b64(data)))
        if sock in ready:
            why = _frame(frames, stdout)
            if why:
                return why


def _frame(frames: Stream[m.AttachOk | m.OutputFrame], stdout: int) -> str | None:
    """The next frame of the attach to the terminal; why it ended, at its end."""
    frame = next(frames, None)
    if frame is None:
        return f"session {frames.end.reason if frames.end is not None else 'ended'}"
    if isinstance(frame, m.OutputFrame):
        os.write(stdout, base64.b64decode(frame.data))
    return None
