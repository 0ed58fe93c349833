"""The dashboard's containers, its events pane, and the compositor they are drawn with.

The holders exist for Textual's compositor (see Holder); the events pane keeps the
newest lines that fit without the layout pass a growing log would cost; the main
screen's compositor (`BandCompositor`) renders only the lines a partial frame repaints.
"""

import collections
from typing import Unpack

from rich.text import Text
from textual._compositor import ChopsUpdate, Compositor
from textual.containers import Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip

from bench_cli.dash.lines import Lines, WidgetOptions

# A frame that repaints a few lines renders those lines only: the main screen's compositor.
#
# Textual's compositor draws a partial frame from one crop, the box around every dirty
# region, and asks each widget that overlaps it for every one of its visible lines (from
# its line cache, each line still cropped, filtered and divided): an event that changes
# one row of the sessions pane (top left) and one line of the events pane (bottom right)
# spans the whole screen, so the frame fetched the lines of all four panes and their
# holders (~200 lines for the 2 that changed).
#
# Here a partial frame goes band by band (a band: a run of adjacent rows that changed)
# and asks each widget that overlaps a band for that band's rows alone, leaving out a
# widget whose part of the band is covered by those in front of it (a holder behind its
# pane, the screen); everything else is Textual's: the same spans, the same cuts, the
# same order of widgets (the first widget to fill a cut wins), the same cells written to
# the terminal. Full frames (a resize, a new screen, a layout) are left to Textual.
#
# It works on Textual's compositor from inside (its cuts, spans and update); a test
# (tests/dash/test_panes.py) checks its rows against Textual's own, cell for cell, so an
# upgrade that changes them shows there.


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
