"""The dashboard's panes, their containers, and the compositor they are drawn with.
Each is built to cost little per event: docs/dashboard.md, "What it costs", says how.
"""

import collections
from collections.abc import Sequence

from rich.text import Text
from textual import events, on
from textual._compositor import ChopsUpdate, Compositor
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Region
from textual.message import Message
from textual.screen import Screen
from textual.strip import Strip

from bench_cli.dash.lines import Lines

Cell = str | Text
Cells = tuple[Cell, ...]  # a row: one cell per column
Widths = tuple[int, ...]  # a width per column (0: left out)
# What a line was built from: the header's (widths, pane width), a row's
# (cells, widths, pane width, cursor mark).
_Made = tuple[Widths, int] | tuple[Cells, Widths, int, str]


class RowMessage(Message):
    def __init__(self, pane: "Rows", key: str) -> None:
        super().__init__()
        self.pane, self.key = pane, key


class Rows(Lines, can_focus=True):
    """Rows with a cursor (the sessions and mail panes), not Textual's DataTable, which
    renders every visible cell again after one changes. Keys: the arrows (k/j are
    actions), Home/End, PageUp/PageDown, Enter; a click selects a row."""

    BINDINGS = [
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("pageup", "move(-10)", show=False),
        Binding("pagedown", "move(10)", show=False),
        Binding("home", "move(-1000000)", show=False),
        Binding("end", "move(1000000)", show=False),
        Binding("enter", "choose", show=False),
    ]

    class Highlighted(RowMessage):
        """The cursor moved onto the row of `key`."""

    class Chosen(RowMessage):
        """Enter or a double click on the row of `key`."""

    def __init__(
        self,
        columns: list[str],
        narrow: tuple[tuple[str, int], ...] = (),
        *,
        id: str,
    ) -> None:
        super().__init__(id)
        self.columns = columns
        # What a pane too narrow leaves out or narrows first: see fit.
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

    @on(events.Focus)
    @on(events.Blur)
    @on(events.Resize)
    def _redraw(self) -> None:
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


# A partial frame rendered band by band (docs/dashboard.md, "What it costs"): Textual's
# compositor asks every widget under the box around all dirty regions for all its
# lines. Everything else is Textual's (spans, cuts, the order of widgets, the cells
# written); full frames are left to Textual. It works on Textual's compositor from
# inside: tests/dash/test_panes.py checks its rows against Textual's, cell for cell, so
# an upgrade that changes them shows there.


_NONE: dict[int, Strip | None] = {}  # a row no span is on (never written to)


class BandCompositor(Compositor):
    def render_partial_update(self) -> ChopsUpdate | None:
        screen = self.size.region
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        spans = list(self._regions_to_spans(update_regions))
        cuts = self.cuts
        # Only the rows of the spans are read from the update: the others stay empty.
        chops: list[dict[int, Strip | None]] = [_NONE] * len(cuts)
        for y, _, _ in spans:
            if chops[y] is _NONE:
                chops[y] = dict.fromkeys(cuts[y][:-1])
        for band in _bands(spans):
            band = band.intersection(screen)
            if band.area:
                self._render_band(band, chops)
        return ChopsUpdate(chops, spans, [c[1:] for c in cuts])

    def _render_band(self, band: Region, chops: list[dict[int, Strip | None]]) -> None:
        """Fill `chops` for the rows of `band` (each one a row to render), as
        Compositor._render_chops does for its crop, from the widgets over the band."""
        cuts = self.cuts
        top, bottom = band.y, band.bottom
        overlaps = band.overlaps
        for widget, (region, clip) in self.visible_widgets.items():
            visible = region.intersection(clip)
            if not overlaps(visible):
                continue
            x, y, width, height = visible
            y0, y1 = max(y, top), min(y + height, bottom)
            last_x = x + width
            # Left out when every chop of its rows that the band needs is already filled
            # by a widget in front of it (a holder behind its pane, the screen).
            lo, hi = max(x, band.x), min(last_x, band.right)
            if all(
                chops[row].get(cut) is not None
                for row in range(y0, y1)
                for cut, end in zip(cuts[row], cuts[row][1:], strict=False)
                if cut < hi and end > lo
            ):
                continue
            # The widget's own lines y0..y1 (its coordinates), its visible columns.
            strips = widget.render_lines(Region(x - region.x, y0 - region.y, width, y1 - y0))
            for row, strip in zip(range(y0, y1), strips, strict=False):
                line = chops[row]
                final_cuts = [cut for cut in cuts[row] if last_x >= cut >= x]
                pieces = strip.divide([cut - x for cut in final_cuts[1:]])
                for cut, piece in zip(final_cuts, pieces, strict=False):
                    if line.get(cut) is None:  # front to back: the first to fill it wins
                        line[cut] = piece


def _bands(spans: list[tuple[int, int, int]]) -> list[Region]:
    """Runs of adjacent rows among the spans (sorted by row), each the box of its spans."""
    out: list[Region] = []
    y0 = last = x1 = x2 = -1
    for y, a, b in spans:
        if y == last or y == last + 1:
            x1, x2 = min(x1, a), max(x2, b)
        else:
            if last >= 0:
                out.append(Region(x1, y0, x2 - x1, last - y0 + 1))
            y0, x1, x2 = y, a, b
        last = y
    if last >= 0:
        out.append(Region(x1, y0, x2 - x1, last - y0 + 1))
    return out


class EventsPane(Lines):
    """The newest event lines that fit, bottom-aligned. Not a RichLog: a RichLog's every
    write changes its virtual size, which costs a layout pass of the whole screen."""

    def __init__(self, id: str) -> None:
        super().__init__(id)
        self.lines: collections.deque[str] = collections.deque(maxlen=300)

    def write(self, line: str) -> None:
        self.lines.append(line)
        rows = max(1, self.content_size.height or 10)
        shown = self.texts
        if len(shown) >= rows:
            shown = shown[len(shown) - rows // 2 :] if rows > 1 else []
        self.set_lines([*shown, Text(line, no_wrap=True, overflow="crop")])

    def show(self) -> None:
        rows = max(1, self.content_size.height or 10)
        tail = list(self.lines)[-rows:]
        self.set_lines([Text(line, no_wrap=True, overflow="crop") for line in tail])

    def on_resize(self) -> None:
        self.show()


class Holder(Vertical):
    """A blank holder for panes: a pane in its own holder is left out of frames that
    change only its neighbours; BLANK, as its panes cover it (docs/dashboard.md)."""

    BLANK = True


class DashScreen(Screen[None]):  # None: it is never dismissed with a result
    """The main screen: covered by the holders, so it is BLANK too. Its partial frames
    render the rows that changed, not the box around them (see BandCompositor)."""

    BLANK = True

    def __init__(
        self, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name, id, classes)
        self._compositor = BandCompositor()
