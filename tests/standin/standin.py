"""The stand-in agent used by the tests and by ``just mail-proof``.

A tiny, stdlib-only imitation of a TUI coding agent (Claude Code, Codex) meant to run inside a
pty under benchd. It behaves enough like the real thing for wakes to be tested end to end:

* After ``--startup-delay`` seconds of silence it puts its terminal in raw mode, enables
  bracketed paste (``ESC[?2004h``), prints the banner ``standin agent <handle>`` (the handle
  comes from ``$BENCH_HANDLE``, ``?`` when unset) and the prompt ``standin> ``.
* Printable bytes are echoed and added to the line; a bracketed paste (``ESC[200~`` ...
  ``ESC[201~``) is added literally, newlines and all (a ``\\r`` or ``\\r\\n`` inside a paste is
  kept as ``\\n``); backspace deletes; Ctrl-C or Ctrl-D on an empty line exits 0 (Ctrl-C on a
  non-empty line clears it); Enter (``\\r``) submits. Other escape sequences are ignored, and
  any of these may arrive split across reads.
* ``--swallow-enters N``: after any typed or pasted text, the next N Enters are ignored
  without output (Claude Code's Ink sometimes drops the Enter that follows a paste).
* ``--enter-guard-ms MS``: an Enter arriving less than MS ms after the last other input byte
  becomes a newline in the line instead of submitting it (Codex does this).
* On submit it prints ``\\r\\n``, appends ``{"t", "line", "pasted"}`` as a JSON line to
  ``--record FILE``, then either rings (``You have mail from X: PATH``, surrounding whitespace
  and newlines ignored, with ``--ring NEXT``:
  reads the first integer N in the mail body and runs ``bench mail send NEXT --in-reply-to ID
  -m "number N+1"`` (ID: the ``id`` of the mail's front matter, left out when it has none, so
  each hop is a reply to the mail that woke it), printing ``sent number N+1 to NEXT`` or ``ring error: ...``), or with ``--on-mail CMD``
  runs ``CMD PATH`` (CMD split like a shell line) and prints its output, as an agent's
  shell tool would; otherwise it prints ``ok: <line>``; with
  ``--work-seconds S`` it prints ``working...`` every 50 ms for S seconds; then a new prompt.
* ``--busy``: prints ``busy <n>`` every 20 ms forever, redrawing the prompt, and still takes
  input.
* It exits 0 on EOF or EIO of stdin, and 128+signal on SIGTERM, SIGHUP or SIGINT, restoring the
  terminal on every path.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Callable

PROMPT = "standin> "
BANNER = "standin agent "
PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
BRACKETED_PASTE_ON = "\x1b[?2004h"
BRACKETED_PASTE_OFF = "\x1b[?2004l"
MAIL_RE = re.compile(r"You have mail from (\S+): (\S+)")
INT_RE = re.compile(r"-?\d+")
BUSY_INTERVAL = 0.020
WORK_INTERVAL = 0.050
MAX_ESCAPE = 64
RING_TIMEOUT = 60.0


class _Exit(BaseException):
    """Leave the main loop with an exit code (raised from signal handlers too)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def write_fd(data: str | bytes, fd: int = 1) -> None:
    """Write everything to fd, encoding text as UTF-8."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def visible(text: str) -> str:
    """Text as echoed on a raw terminal: newlines as CR LF, other controls as ^X."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append("\r\n")
        elif ch == "\t" or (code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0):
            out.append(ch)
        else:
            out.append("^" + chr((code ^ 0x40) & 0x7F))
    return "".join(out)


def mail_body(text: str) -> str:
    """The body of a mail file: whatever follows its ``---`` front matter block."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return text
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[i + 1 :])
    return ""


def mail_id(text: str) -> str | None:
    """The ``id`` field of a mail file's front matter, None when it has none."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            return None
        key, sep, value = line.partition(":")
        value = value.strip()
        if sep and key.strip() == "id" and value:
            if value.startswith('"'):  # bench writes its fields as JSON strings
                try:
                    return str(json.loads(value))
                except ValueError:
                    return None
            return value
    return None


def _normalize_paste(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _is_printable(ch: str) -> bool:
    code = ord(ch)
    return ch == "\t" or (code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0)


class Agent:
    """The line editor and submit handling, fed raw input bytes; writes through ``write``."""

    def __init__(self, args: argparse.Namespace, write: Callable[[str], None]) -> None:
        self.args = args
        self.write = write
        self.buf: list[str] = []
        self.pasted = False
        self.swallow_left = 0
        self.last_input = float("-inf")
        self.state = "normal"  # normal | esc | csi | ss3 | paste
        self.esc = ""
        self.paste = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.busy_count = 0

    # -- input -----------------------------------------------------------------------------

    def feed(self, data: bytes, now: float) -> None:
        """Handle one chunk of input read at monotonic time ``now``. May raise _Exit."""
        text = self.decoder.decode(data)
        i = 0
        while i < len(text):
            if self.state == "paste":
                i = self._feed_paste(text, i, now)
                continue
            ch = text[i]
            i += 1
            if ch != "\r":
                self.last_input = now
            if self.state == "esc":
                if ch == "[":
                    self.esc += ch
                    self.state = "csi"
                elif ch == "O":
                    self.state = "ss3"
                elif ch == "\x1b":
                    self.esc = ch
                else:
                    self.state = "normal"  # Alt+key: ignored
            elif self.state == "ss3":
                self.state = "normal"  # SS3 key (F1-F4, keypad): ignored
            elif self.state == "csi":
                code = ord(ch)
                if 0x20 <= code <= 0x3F and len(self.esc) < MAX_ESCAPE:
                    self.esc += ch
                elif 0x40 <= code <= 0x7E:
                    self.esc += ch
                    self.state = "normal"
                    if self.esc == PASTE_START:
                        self.state = "paste"
                        self.paste = ""
                else:
                    self.state = "normal"  # malformed: drop it, handle ch afresh
                    i -= 1
            else:
                self._key(ch, now)

    def _feed_paste(self, text: str, i: int, now: float) -> int:
        self.last_input = now
        start = max(0, len(self.paste) - len(PASTE_END) + 1)
        self.paste += text[i:]
        j = self.paste.find(PASTE_END, start)
        if j < 0:
            return len(text)
        rest = len(self.paste) - (j + len(PASTE_END))
        content = self.paste[:j]
        self.paste = ""
        self.state = "normal"
        self._insert(_normalize_paste(content), pasted=True)
        return len(text) - rest

    def _key(self, ch: str, now: float) -> None:
        if ch == "\x1b":
            self.state = "esc"
            self.esc = ch
        elif ch == "\r":
            self._enter(now)
        elif ch in ("\x7f", "\x08"):
            self._backspace()
        elif ch == "\x03":
            if not self.buf:
                raise _Exit(0)
            self.buf = []
            self.pasted = False
            self.swallow_left = 0
            self.write("^C\r\n" + PROMPT)
        elif ch == "\x04":
            if not self.buf:
                raise _Exit(0)
        elif ch == "\n" or _is_printable(ch):
            self._insert(ch, pasted=False)
        # other control characters are ignored

    def _insert(self, text: str, pasted: bool) -> None:
        self.buf.extend(text)
        if pasted:
            self.pasted = True
        self.swallow_left = self.args.swallow_enters
        self.write(visible(text))

    def _backspace(self) -> None:
        if not self.buf:
            return
        ch = self.buf.pop()
        if ch != "\n":
            width = len(visible(ch))
            self.write("\b" * width + " " * width + "\b" * width)
            return
        # Back up to the end of the previous line of the buffer.
        text = "".join(self.buf)
        last = text.rsplit("\n", 1)
        column = len(visible(last[-1])) + (len(PROMPT) if len(last) == 1 else 0)
        self.write(f"\x1b[A\x1b[{column + 1}G")

    def _enter(self, now: float) -> None:
        guard = self.args.enter_guard_ms
        if guard > 0 and (now - self.last_input) * 1000.0 < guard:
            self.buf.append("\n")
            self.write("\r\n")
            return
        if self.swallow_left > 0:
            self.swallow_left -= 1
            return
        self.submit()

    # -- submit ----------------------------------------------------------------------------

    def submit(self) -> None:
        line = "".join(self.buf)
        pasted = self.pasted
        self.buf = []
        self.pasted = False
        self.swallow_left = 0
        self.write("\r\n")
        self._record(line, pasted)
        match = MAIL_RE.fullmatch(line.strip())
        if match and self.args.ring:
            self._ring(match.group(2))
        elif match and self.args.on_mail:
            self._on_mail(match.group(2))
        else:
            self.write("ok: " + visible(line) + "\r\n")
        self._work()
        self.write(PROMPT)

    def _record(self, line: str, pasted: bool) -> None:
        if not self.args.record:
            return
        entry = json.dumps({"t": time.time(), "line": line, "pasted": pasted})
        try:
            with open(self.args.record, "a", encoding="utf-8") as f:
                f.write(entry + "\n")
                f.flush()
        except OSError as e:
            self.write(f"record error: {e}\r\n")

    def _ring(self, path: str) -> None:
        target = self.args.ring
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            self.write(visible(f"ring error: cannot read {path}: {e}") + "\r\n")
            return
        found = INT_RE.search(mail_body(text))
        if not found:
            self.write(visible(f"ring error: no number in the body of {path}") + "\r\n")
            return
        number = int(found.group()) + 1
        bench = self.args.bench or shutil.which("bench")
        if not bench:
            self.write("ring error: no bench on PATH\r\n")
            return
        cmd = [bench, "mail", "send", target, "-m", f"number {number}"]
        answered = mail_id(text)
        if answered is not None:  # a reply to the mail it got: `in-reply-to` links the hops
            cmd[4:4] = ["--in-reply-to", answered]
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=RING_TIMEOUT,
            )
        except Exception as e:  # noqa: BLE001 - a failed ring must never crash the agent
            self.write(visible(f"ring error: {e}") + "\r\n")
            return
        if proc.returncode == 0:
            self.write(f"sent number {number} to {visible(target)}\r\n")
            return
        output = (proc.stdout + proc.stderr).decode("utf-8", "replace").rstrip("\n")
        self.write(visible(f"ring error: bench exited {proc.returncode}") + "\r\n")
        if output:
            self.write(visible(output) + "\r\n")

    def _on_mail(self, path: str) -> None:
        cmd = [*shlex.split(self.args.on_mail), os.path.expanduser(path)]
        try:
            proc = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=RING_TIMEOUT
            )
        except Exception as e:  # noqa: BLE001 - a failed command must never crash the agent
            self.write(visible(f"on-mail error: {e}") + "\r\n")
            return
        output = (proc.stdout + proc.stderr).decode("utf-8", "replace").rstrip("\n")
        for out_line in output.splitlines():
            self.write(visible(out_line) + "\r\n")
        if proc.returncode != 0:
            self.write(f"on-mail error: exited {proc.returncode}\r\n")

    def _work(self) -> None:
        seconds = self.args.work_seconds
        if seconds <= 0:
            return
        end = time.monotonic() + seconds
        while True:
            self.write("working...\r\n")
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(WORK_INTERVAL, remaining))

    # -- busy ------------------------------------------------------------------------------

    def busy_tick(self) -> None:
        self.busy_count += 1
        line = visible("".join(self.buf))
        self.write(f"\r\x1b[Kbusy {self.busy_count}\r\n{PROMPT}{line}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="standin", description="Stand-in TUI agent for bench tests and just mail-proof."
    )
    parser.add_argument(
        "--startup-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stay silent this long before the banner and prompt",
    )
    parser.add_argument(
        "--swallow-enters",
        type=int,
        default=0,
        metavar="N",
        help="ignore the first N Enters after any typed or pasted text",
    )
    parser.add_argument(
        "--enter-guard-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="an Enter within MS ms of other input becomes a newline",
    )
    parser.add_argument(
        "--record", metavar="FILE", help="append each submitted line to FILE as JSON"
    )
    parser.add_argument(
        "--ring",
        metavar="NEXT",
        help="on 'You have mail from X: PATH' send 'number N+1' to NEXT",
    )
    parser.add_argument(
        "--on-mail",
        metavar="CMD",
        help="on 'You have mail from X: PATH' run CMD PATH and print its output",
    )
    parser.add_argument(
        "--bench", metavar="PATH", help="bench executable for --ring (default: bench on PATH)"
    )
    parser.add_argument(
        "--work-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="after each submit print 'working...' every 50 ms for S seconds",
    )
    parser.add_argument("--busy", action="store_true", help="print 'busy <n>' every 20 ms forever")
    return parser.parse_args(argv)


def _on_signal(signum: int, frame: object) -> None:
    raise _Exit(128 + signum)


def run(args: argparse.Namespace) -> int:
    agent = Agent(args, write_fd)
    handle = os.environ.get("BENCH_HANDLE") or "?"
    write_fd(BRACKETED_PASTE_ON)
    write_fd(f"{BANNER}{visible(handle)}\r\n{PROMPT}")
    next_busy = time.monotonic() + BUSY_INTERVAL
    while True:
        timeout = max(0.0, next_busy - time.monotonic()) if args.busy else None
        ready, _, _ = select.select([0], [], [], timeout)
        if ready:
            try:
                data = os.read(0, 4096)
            except OSError as e:
                if e.errno == errno.EIO:
                    return 0
                raise
            if not data:
                return 0
            agent.feed(data, time.monotonic())
        if args.busy:
            now = time.monotonic()
            if now >= next_busy:
                agent.busy_tick()
                next_busy = max(next_busy + BUSY_INTERVAL, now)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_signals = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    for sig in stop_signals:
        signal.signal(sig, _on_signal)
    saved = None
    started = False
    try:
        if args.startup_delay > 0:
            time.sleep(args.startup_delay)
        if os.isatty(0):
            saved = termios.tcgetattr(0)
            tty.setraw(0)
        started = True
        return run(args)
    except _Exit as e:
        return e.code
    except OSError as e:
        if e.errno in (errno.EIO, errno.EPIPE):
            return 0
        raise
    finally:
        for sig in stop_signals:
            signal.signal(sig, signal.SIG_IGN)
        if started:
            try:
                write_fd(BRACKETED_PASTE_OFF)
            except OSError:
                pass
        if saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSANOW, saved)
            except (OSError, termios.error):
                pass


if __name__ == "__main__":
    sys.exit(main())
