"""A list of rows with a cursor: the sessions and mail panes.

Not Textual's DataTable: redrawing a DataTable after a cell changes renders every visible
cell through Rich, which made an event cost the dashboard several times the daemon's CPU
(the dash-idle benchmark). This pane builds one Text per row with fixed column widths,
builds it again only when the row's cells change, and repaints only the rows that
changed (see lines.py); it never asks for a layout pass. Keys: up/down (k/j are taken by actions, so only the
arrows), Home/End, PageUp/PageDown, Enter; a click selects a row.
"""

from collections.abc import Sequence
from typing import Unpack

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message

from bench_cli.dash.lines import Lines, WidgetOptions

Cell = str | Text
Cells = tuple[Cell, ...]  # a row: one cell per column
Widths = tuple[int, ...]  # a width per column (0: left out)
# What a line was built from: the header's (widths, pane width), a row's
# (cells, widths, pane width, cursor mark).
_Made = tuple[Widths, int] | tuple[Cells, Widths, int, str]


class Rows(Lines, can_focus=True):
    BINDINGS = [
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("pageup", "move(-10)", show=False),
        Binding("pagedown", "move(10)", show=False),
        Binding("home", "move(-1000000)", show=False),
        Binding("end", "move(1000000)", show=False),
        Binding("enter", "choose", show=False),
    ]

    class Highlighted(Message):
        def __init__(self, pane: "Rows", key: str) -> None:
            super().__init__()
            self.pane, self.key = pane, key

    class Chosen(Message):
        def __init__(self, pane: "Rows", key: str) -> None:
            super().__init__()
            self.pane, self.key = pane, key

    def __init__(
        self,
        columns: list[str],
        narrow: tuple[tuple[str, int], ...] = (),
        **kw: Unpack[WidgetOptions],
    ) -> None:
        super().__init__(**kw)
        self.columns = columns
        # When the pane is too narrow, in this order: (column, 0) leaves it out whole,
        # (column, N) narrows it down to N (see fit): the columns that matter most stay.
        self.narrow = tuple((columns.index(c), n) for c, n in narrow)
        self.keys: list[str] = []
        self.cells: list[Cells] = []
        self.cursor = 0
        self.top = 0  # the first row shown
        # row (-1: the header) -> (what its line was built from, the line)
        self._built: dict[int, tuple[_Made, Text]] = {}
        # id(cells) -> (those cells, their lengths): kept while the row's cells are kept
        self._lens: dict[int, tuple[Cells, Widths]] = {}

    def set_rows(self, rows: Sequence[tuple[str, Cells]], keep_key: bool = True) -> None:
        """Replace the rows: (key, cells); the cursor stays on the same key if it can."""
        old = self.keys[self.cursor] if self.keys and keep_key else None
        self.keys = [k for k, _ in rows]
        self.cells = [c for _, c in rows]
        if old in self.keys:
            self.cursor = self.keys.index(old)
        self.cursor = max(0, min(self.cursor, len(self.keys) - 1))
        self.show()

    @property
    def current(self) -> str | None:
        return self.keys[self.cursor] if self.keys else None

    def show(self) -> None:
        height = max(2, self.content_size.height or 10)
        width = max(10, self.content_size.width or 40)
        body = height - 1
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + body:
            self.top = self.cursor - body + 1
        # Each column as wide as its widest cell (at most 40), the header included. A
        # row's cell lengths are measured again only when its cells are a new tuple (an
        # event gives one row new cells; the others are the same objects).
        lens = [tuple(len(c) for c in self.columns)]
        measured: dict[int, tuple[Cells, Widths]] = {}
        for row in self.cells:
            old_len = self._lens.get(id(row))
            if old_len is None or old_len[0] is not row:
                old_len = (row, tuple(min(40, len(str(v))) for v in row))
            measured[id(row)] = old_len
            lens.append(old_len[1])
        self._lens = measured
        # A width per column (0: left out), fitted to the pane.
        widths = fit(tuple(map(max, zip(*lens, strict=True))), width, self.narrow)
        old = self._built.get(-1)  # the header row
        if old is not None and old[0] == (widths, width):
            head = old[1]
        else:
            head = self._line(self.columns, widths, width)
            head.stylize("bold")
        out = [head]
        built: dict[int, tuple[_Made, Text]] = {-1: ((widths, width), head)}
        for i in range(self.top, min(len(self.cells), self.top + body)):
            mark = ("reverse" if self.has_focus else "underline") if i == self.cursor else ""
            key: _Made = (self.cells[i], widths, width, mark)
            old = self._built.get(i)
            if old is not None and old[0] == key:
                line = old[1]
            else:
                line = self._line(self.cells[i], widths, width)
                if mark:
                    line.stylize(mark)
            built[i] = (key, line)
            out.append(line)
        self._built = built
        self.set_lines(out)

    @staticmethod
    def _line(cells: Sequence[Cell], widths: Widths, width: int) -> Text:
        t = Text(no_wrap=True, overflow="crop")
        for i, v in enumerate(cells):
            if not widths[i]:
                continue
            cell = v.copy() if isinstance(v, Text) else Text(str(v))  # the cells stay as given
            cell.truncate(widths[i], overflow="ellipsis", pad=True)
            if len(t):
                t.append("  ")
            t.append(cell)
        t.truncate(width, pad=True)
        return t

    def action_move(self, by: int) -> None:
        if not self.keys:
            return
        new = max(0, min(len(self.keys) - 1, self.cursor + by))
        if new != self.cursor:
            self.cursor = new
            self.show()
            self.post_message(self.Highlighted(self, self.keys[new]))

    def action_choose(self) -> None:
        if self.keys:
            self.post_message(self.Chosen(self, self.keys[self.cursor]))

    def on_click(self, event: events.Click) -> None:
        i = self.top + event.y - 1  # the first line is the header
        if 0 <= i < len(self.keys):
            self.cursor = i
            self.show()
            self.post_message(self.Highlighted(self, self.keys[i]))
            if event.chain >= 2:
                self.post_message(self.Chosen(self, self.keys[i]))

    def on_focus(self) -> None:
        self.show()

    def on_blur(self) -> None:
        self.show()

    def on_resize(self) -> None:
        self.show()


def fit(widths: Widths, width: int, steps: tuple[tuple[int, int], ...]) -> Widths:
    """Column widths for a pane `width` wide (two spaces between columns). Each step,
    until the columns fit, is (column, narrowest): narrowest 0 leaves the column out,
    any other number narrows the column by what is too much, down to that width."""
    out = list(widths)

    def total() -> int:
        shown = [w for w in out if w]
        return sum(shown) + 2 * (len(shown) - 1)

    for i, narrowest in steps:
        if total() <= width:
            break
        if not narrowest:
            out[i] = 0
        elif out[i]:
            out[i] = max(min(narrowest, out[i]), out[i] - (total() - width))
    return tuple(out)
