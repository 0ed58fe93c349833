"""The dashboard's containers and its events pane.

The holders exist for Textual's compositor (see Holder); the events pane keeps the
newest lines that fit without the layout pass a growing log would cost.
"""

import collections
from typing import Unpack

from rich.text import Text
from textual.containers import Vertical
from textual.screen import Screen

from bench_cli.dash.lines import Lines, WidgetOptions
from bench_cli.dash.partial import BandCompositor


class EventsPane(Lines):
    """The newest event lines that fit, bottom-aligned. Not a RichLog: a RichLog's every
    write changes its virtual size, which costs a layout pass of the whole screen."""

    def __init__(self, **kw: Unpack[WidgetOptions]) -> None:
        super().__init__(**kw)
        self.lines: collections.deque[str] = collections.deque(maxlen=300)

    def write(self, line: str) -> None:
        self.lines.append(line)
        rows = max(1, self.content_size.height or 10)
        shown = self.texts
        if len(shown) >= rows:
            shown = shown[len(shown) - rows // 2 :] if rows > 1 else []
        self.set_lines([*shown, Text(line, no_wrap=True, overflow="crop")])

    def clear(self) -> None:
        self.lines.clear()
        self.show()

    def show(self) -> None:
        rows = max(1, self.content_size.height or 10)
        tail = list(self.lines)[-rows:]
        self.set_lines([Text(line, no_wrap=True, overflow="crop") for line in tail])

    def on_resize(self) -> None:
        self.show()


class Holder(Vertical):
    """A blank holder for panes. Textual composes a frame's dirty area from every widget
    whose parent's area overlaps it, rendering each in full: a pane in its own holder is
    left out of frames that change only its neighbours. BLANK (Textual's flag for a widget
    with no border or content of its own): the holder's own lines are never rendered,
    as its panes cover it."""

    BLANK = True


class DashScreen(Screen[None]):  # None: it is never dismissed with a result
    """The main screen: covered by the holders, so it is BLANK too. Its partial frames
    render the rows that changed, not the box around them (see partial.py)."""

    BLANK = True

    def __init__(
        self, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name, id, classes)
        self._compositor = BandCompositor()
