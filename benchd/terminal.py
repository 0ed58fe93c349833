"""A child in a pty owned by the daemon: spawn, drain, write, resize, screen, exit.

The daemon always drains the pty (a child never blocks on a full pty): a reader task
moves every byte into a bounded scrollback and to live followers. The screen model
(pyte) is fed lazily, only when someone needs "what the screen shows now" (the ready
pattern, Enter verification, `tail --screen`): feeding a VT emulator every byte of a
program printing megabytes per second would make draining slower than the program.
If more than SCREEN_BACKLOG bytes piled up unseen, the screen is rebuilt from the
newest part only (a full-screen TUI redraws itself often; a scrolling one shows its
last lines).
"""

import os
import time

import ptyprocess
import pyte
import trio

SCREEN_BACKLOG = 512 * 1024
SCREEN_KEEP = 128 * 1024
PASTE_ON = b"\x1b[?2004h"
PASTE_OFF = b"\x1b[?2004l"
# The umask a session's program starts with: the one benchd was started with (benchd
# itself runs with 077), so agents create files as they would outside bench.
SESSION_UMASK: int | None = None


def _session_umask() -> None:
    if SESSION_UMASK is not None:
        os.umask(SESSION_UMASK)


class Terminal:
    def __init__(self, argv, cwd, env, rows, cols, scrollback):
        self.proc = ptyprocess.PtyProcess.spawn(argv, cwd=cwd, env=env, dimensions=(rows, cols),
                                                preexec_fn=_session_umask)
        self.pid = self.proc.pid
        self.fd = self.proc.fd
        os.set_blocking(self.fd, False)
        self.rows, self.cols = rows, cols
        self.scrollback_cap = scrollback
        self.scrollback = bytearray()
        self.total_out = 0
        self.last_output: float | None = None  # monotonic; None until the first byte
        self.bracketed_paste = False
        self._tail = b""
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self._unseen = bytearray()
        self.changed = trio.Event()  # set (and replaced) whenever output arrives
        self.followers: set[trio.MemorySendChannel] = set()
        self.eof = False

    # ------------------------------------------------------------ output

    async def drain(self) -> None:
        """Read until the pty closes (EIO once no process holds the slave)."""
        while True:
            try:
                await trio.lowlevel.wait_readable(self.fd)
            except (trio.ClosedResourceError, OSError):
                break
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break
            if not data:
                break
            self._took(data)
        self.eof = True
        self.changed.set()

    def _took(self, data: bytes) -> None:
        self.last_output = time.monotonic()
        self.total_out += len(data)
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
            self.screen.reset()
        for ch in list(self.followers):
            try:
                ch.send_nowait(data)
            except trio.WouldBlock:
                ch.close()  # a follower that cannot keep up is dropped, never waited for
                self.followers.discard(ch)
            except trio.ClosedResourceError:
                self.followers.discard(ch)
        ev, self.changed = self.changed, trio.Event()
        ev.set()

    def screen_lines(self) -> list[str]:
        """The screen as text, as a person would see it now."""
        if self._unseen:
            data, self._unseen = bytes(self._unseen), bytearray()
            self.stream.feed(data)
        return list(self.screen.display)

    def screen_text(self) -> str:
        lines = [line.rstrip() for line in self.screen_lines()]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

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

    def resize(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        try:
            self.proc.setwinsize(rows, cols)
        except OSError:
            pass
        self.screen_lines()
        self.screen.resize(rows, cols)

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
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
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

    def signal_group(self, sig: int) -> None:
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
        for ch in list(self.followers):
            ch.close()
        self.followers.clear()

