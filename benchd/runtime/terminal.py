"""A child in a pty owned by the daemon: spawn, drain, write, resize, screen, exit.

The pty is always drained into a bounded scrollback and to followers. The screen model
(pyte) is fed lazily, in a worker thread, only when someone asks what the screen shows:
feeding it every byte would make draining slower than a fast program. Past
SCREEN_BACKLOG unseen bytes, the screen is rebuilt from the newest part only.
"""

import functools
import os
import signal
from collections.abc import Callable, Mapping
from typing import TypeVar

import ptyprocess
import pyte
import trio
from wcwidth import wcwidth

from bench_wire.errors import WireError
from benchd.runtime import vt
from benchd.runtime.hub import Broadcast
from benchd.runtime.system import child_pids, libc_prctl

T = TypeVar("T")

SCREEN_BACKLOG = 512 * 1024
SCREEN_KEEP = 128 * 1024
DRAIN_BATCH = 64 * 1024  # bytes read per wake-up at most, so one busy pty cannot hog the loop
MAX_ROWS = 500
MAX_COLS = 1000
PASTE_ON = b"\x1b[?2004h"
PASTE_OFF = b"\x1b[?2004l"


PR_SET_PDEATHSIG = 1


def _child_setup(
    umask: int | None, die_with: int | None, prctl: Callable[[int, int], int] | None
) -> None:
    """In the forked child, before exec: the signals Python ignores put back (as
    subprocess does). With `die_with`: SIGKILL when the parent dies (kept across exec;
    bwrap's own --die-with-parent comes too late), and leave at once if it died already
    (the check after the prctl closes the gap before it)."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    if umask is not None:
        os.umask(umask)
    if die_with is not None and prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != die_with:
            os._exit(1)


class Terminal:
    def __init__(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        rows: int,
        cols: int,
        scrollback: int,
        umask: int | None = None,
        die_with: int | None = None,
        sandboxed: bool = False,
    ) -> None:
        # `umask`: the program's (benchd itself runs with 077), so agents create files
        # as they would outside bench. `die_with`: the daemon's pid (_child_setup).
        preexec = functools.partial(_child_setup, umask, die_with, libc_prctl())
        self.proc = ptyprocess.PtyProcess.spawn(
            argv, cwd=cwd, env=env, dimensions=(rows, cols), preexec_fn=preexec
        )
        self.pid: int = self.proc.pid
        self.sandboxed = sandboxed  # the child is bwrap running the program (sandbox.py)
        self.fd: int = self.proc.fd
        os.set_blocking(self.fd, False)
        self.rows, self.cols = rows, cols
        self.scrollback_cap = scrollback
        self.scrollback = bytearray()
        self.last_output: float | None = None  # trio's clock; None until the first byte
        self.bracketed_paste = False
        self._tail = b""
        self.screen = vt.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self._unseen = bytearray()
        self._reset = False  # the emulator is to be reset before the next feed
        self._lines: list[str] = []  # the rendered screen, kept up to date incrementally
        self._screen_lock = trio.Lock()
        self.changed = trio.Event()  # set (and replaced) whenever output arrives
        self.followers: Broadcast[bytes] = Broadcast()  # `tail -f`, `attach`
        self.eof = False

    # ------------------------------------------------------------ output

    async def drain(self) -> None:
        """Read until the pty closes (EIO once no process holds the slave)."""
        while True:
            try:
                await trio.lowlevel.wait_readable(self.fd)
            except (trio.ClosedResourceError, OSError):
                break
            # All the pty holds now, not one read per wake-up: the kernel hands over at
            # most 4 KiB a read, and a scheduler pass (and broadcast) per 4 KiB is slow.
            chunks: list[bytes] = []
            size, ended = 0, False
            while size < DRAIN_BATCH:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""  # EIO: the pty has closed, as an empty read says
                if not data:
                    ended = True
                    break
                chunks.append(data)
                size += len(data)
            if chunks:
                self._took(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if ended:
                break
        self.eof = True
        self.changed.set()

    def _took(self, data: bytes) -> None:
        self.last_output = trio.current_time()  # drain()'s task: trio's clock
        sb = self.scrollback
        sb += data
        if len(sb) > self.scrollback_cap:
            del sb[: len(sb) - self.scrollback_cap]
        # Bracketed paste is on iff the last toggle seen says so (toggles may straddle reads).
        probe = self._tail + data
        on, off = probe.rfind(PASTE_ON), probe.rfind(PASTE_OFF)
        if on != off:
            self.bracketed_paste = on > off
        self._tail = probe[-8:]
        self._unseen += data
        if len(self._unseen) > SCREEN_BACKLOG:
            del self._unseen[: len(self._unseen) - SCREEN_KEEP]
            self._reset = True  # done by the next render (the emulator may be in use)
        self.followers.offer(data)  # one that cannot keep up is dropped, never waited for
        ev, self.changed = self.changed, trio.Event()
        ev.set()

    def _take_unseen(self) -> tuple[bytes, bool]:
        data, self._unseen = bytes(self._unseen), bytearray()
        reset, self._reset = self._reset, False
        return data, reset

    async def render(self) -> tuple[list[str], int, int]:
        """(lines, cursor row, cursor column) as a person would see the screen now."""
        async with self._screen_lock:
            data, reset = self._take_unseen()
            if not data and not reset and self._lines and not self.screen.dirty:
                return list(self._lines), self.screen.cursor.y, self.screen.cursor.x
            return await trio.to_thread.run_sync(self._render, data, reset, None)

    async def inspect(self, fn: Callable[[pyte.Screen, list[str]], T]) -> T:
        """`fn(screen, lines)` of the screen brought up to date, in the worker thread under
        the screen lock: for callers that need more than the text (colours, cursor)."""
        async with self._screen_lock:
            data, reset = self._take_unseen()

            def work() -> T:
                lines = self._render(data, reset, None)[0]
                return fn(self.screen, lines)

            return await trio.to_thread.run_sync(work)

    async def screen_text(self) -> str:
        lines = [line.rstrip() for line in (await self.render())[0]]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

    def _render(
        self, data: bytes, reset: bool, size: tuple[int, int] | None
    ) -> tuple[list[str], int, int]:
        """In a worker thread, under the screen lock: feed, resize, render dirty lines."""
        screen = self.screen
        if reset:
            screen.reset()
        if data:
            self.stream.feed(data)
        if size is not None:
            screen.resize(*size)
        if len(self._lines) != screen.lines:
            self._lines = [""] * screen.lines
            screen.dirty.update(range(screen.lines))
        for y in screen.dirty:
            if y < screen.lines:
                self._lines[y] = render_line(screen.buffer[y], screen.columns)
        screen.dirty.clear()
        return list(self._lines), screen.cursor.y, screen.cursor.x

    # ------------------------------------------------------------ input

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.fd)
                continue
            view = view[n:]

    async def resize(self, rows: int, cols: int) -> None:
        """Resize the pty and the screen (a size `check_size` gave)."""
        self.rows, self.cols = rows, cols
        try:
            self.proc.setwinsize(rows, cols)
        except OSError:
            pass
        async with self._screen_lock:
            data, reset = self._take_unseen()
            await trio.to_thread.run_sync(self._render, data, reset, (rows, cols))

    # ------------------------------------------------------------ exit

    async def wait_exit(self) -> tuple[int | None, int | None]:
        """(exit code, signal) once the child has exited (pidfd: no thread per child)."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            pidfd = None  # no pidfd here: poll instead
        try:
            while True:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG
                except ChildProcessError:
                    return None, None
                if pid:
                    break
                if pidfd is None:
                    await trio.sleep(0.05)
                else:
                    await trio.lowlevel.wait_readable(pidfd)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        if os.WIFSIGNALED(status):
            return None, os.WTERMSIG(status)
        return os.WEXITSTATUS(status), None

    def program_group(self) -> int | None:
        """A sandboxed session's program's process group (bwrap -> its init -> the
        program: the init's oldest child); None when it cannot be found."""
        init = child_pids(self.pid)
        program = child_pids(init[0]) if init else []
        if not program:
            return None
        try:
            return os.getpgid(program[0])
        except OSError:
            return None

    def signal_group(self, sig: int) -> None:
        # In a sandbox the leader is bwrap: any signal but SIGKILL goes to the program's
        # group (bwrap would die of it and take everything down at once, so a program
        # that traps SIGHUP could not be asked to leave); SIGKILL to bwrap's ends it all.
        if self.sandboxed and sig != signal.SIGKILL:
            pgid = self.program_group()
            if pgid is not None and pgid != self.pid:
                try:
                    os.killpg(pgid, sig)
                    return
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        try:
            trio.lowlevel.notify_closing(self.fd)
        except Exception:  # noqa: BLE001 - not being waited on
            pass
        # ptyprocess owns the fd through its file object: close it there, once, so its
        # finaliser cannot close a reused fd number later.
        try:
            self.proc.fileobj.close()
        except OSError:
            pass
        self.proc.closed = True
        self.followers.close()


def check_size(rows: int, cols: int, cap: bool = False) -> tuple[int, int]:
    """A terminal size for a pty: at least 1x1, at most MAX_ROWS x MAX_COLS. A bigger
    one is refused, or with `cap` (a client's window, attached) cut down to the most."""
    if rows < 1 or cols < 1 or (not cap and (rows > MAX_ROWS or cols > MAX_COLS)):
        raise WireError(
            "bad-request",
            f"terminal size must be 1-{MAX_ROWS} rows and 1-{MAX_COLS} columns (got {rows}x{cols})",
        )
    return min(rows, MAX_ROWS), min(cols, MAX_COLS)


def render_line(line: Mapping[int, pyte.screens.Char], columns: int) -> str:
    """One screen line as text, as pyte's `display` renders it, but touching only the
    cells that were written (most of a big screen's cells are blank)."""
    if not line:
        return " " * columns
    cells = [" "] * columns
    wide_at = -2
    for x in sorted(line):
        if x >= columns:
            break
        if x == wide_at + 1:
            cells[x] = ""  # the stub after a wide character
            continue
        data = line[x].data
        cells[x] = data
        if data and wcwidth(data[0]) == 2:
            wide_at = x
            if x + 1 < columns:
                cells[x + 1] = ""
    return "".join(cells)
