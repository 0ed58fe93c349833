"""The terminal driver: Textual's, with an input thread that sleeps while no key comes
(Textual's woke ten times a second, taking the GIL: docs/dashboard.md, "What it costs").

The thread waits on the terminal and on a pipe written when the exit flag is set (quit,
or the terminal handed to `bench attach`), with a timeout only while the parser waits
for one (a lone Escape is told from a key's sequence by a short wait).
"""

import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Any

from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

POLL_S = 0.1  # Textual's own wait: used if the parser's timeout cannot be read


class _WakingEvent(threading.Event):
    """The exit flag: setting it wakes the input thread through a pipe."""

    def __init__(self, wake_fd: int):
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_fd, b"x")
        except OSError:  # full (it is woken anyway) or closed (it is gone)
            pass


class QuietDriver(LinuxDriver):
    # `app`: an app of any result type (App's type argument is invariant); `kw`:
    # LinuxDriver's own keywords (debug, mouse, size), passed on.
    def __init__(self, app: App[Any], **kw: Any) -> None:
        super().__init__(app, **kw)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.exit_event: _WakingEvent = _WakingEvent(self._wake_w)

    def close(self) -> None:
        super().close()
        self.exit_event._wake_fd = -1  # a closed number may be reused: never write to it
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def run_input_thread(self) -> None:
        """Textual's LinuxDriver.run_input_thread, waiting without polling."""
        selector = selectors.SelectSelector()
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        feed, tick = parser.feed, parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def timeout() -> float | None:
            """None (no timeout) unless the parser waits for one."""
            try:
                due = parser._timeout_time  # noqa: SLF001 - Textual's, see POLL_S
            except AttributeError:
                return POLL_S
            return None if due is None else max(0.0, due - get_time())

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for last, (key, mask) in loop_last(events):
                if key.fd != fileno:
                    try:
                        os.read(self._wake_r, 64)
                    except OSError:
                        pass
                    continue
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not data:
                        break  # stdin piped
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(timeout()))
            selector.unregister(fileno)
            process(selector.select(POLL_S), final=True)
        finally:
            selector.close()
            try:
                for _ in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
