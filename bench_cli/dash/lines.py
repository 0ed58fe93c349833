"""A pane of lines where a line that changes is repainted alone: the base of every pane
(docs/dashboard.md, "What it costs"); and the lines the daemon's frames become (a screen
frame as Rich text with its colours, a message's delivery states on one line).
"""

import functools
from typing import Self

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from bench_cli.dash.model import Answer
from bench_wire.untrusted import mask


class Lines(Widget):
    """Looks and selects as a Static would, but the owner hands over one Rich Text per
    row, and only the rows whose text changed are rendered (straight through Rich: a
    Static renders its whole text on every update) and marked dirty."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self.texts: list[Text] = []  # the lines shown (set_lines replaces them)
        self._strips: dict[int, Strip] = {}  # y -> the rendered line
        # the style and width the strips were rendered for (None: not yet rendered)
        self._strips_for: tuple[RichStyle, int] | None = None
        self._title: str | None = None  # as given to set_title
        self._title_only = False  # set_title at work: a refresh is for the top border row
        self.set_title(id)  # a pane's first title is its id

    def set_lines(self, texts: list[Text]) -> None:
        """Show these lines (top first); repaint the rows whose text changed."""
        old, self.texts = self.texts, texts
        width = self.size.width
        if not width:
            self.refresh()
            return
        # A changed row is marked from border to border: the terminal is sent whole
        # pieces of the frame (a row cut inside a pane is cut again, segment by segment).
        left, width = -self.content_offset.x, self.outer_size.width
        dirty: list[Region] = []
        for y in range(max(len(old), len(texts))):
            if y < len(old) and y < len(texts) and (old[y] is texts[y] or old[y] == texts[y]):
                continue
            self._strips.pop(y, None)
            if dirty and dirty[-1].bottom == y:  # extend the run of changed rows
                last = dirty.pop()
                dirty.append(Region(left, last.y, width, last.height + 1))
            else:
                dirty.append(Region(left, y, width, 1))
        if dirty:
            self.refresh(*dirty)

    def set_title(self, title: str) -> None:
        """A new border title, repainting the top border row alone (setting border_title
        repaints the whole pane: a mail pane's count changed 17 lines, not one)."""
        if title == self._title:
            return
        self._title = title
        self._title_only = True
        try:
            self.border_title = title
        finally:
            self._title_only = False

    def refresh(self, *regions: Region, **kw: bool) -> Self:  # repaint, layout, recompose
        if self._title_only and not regions and not kw:
            # Content coordinates: the border row is above the content.
            top = self.content_offset
            regions = (Region(-top.x, -top.y, self.outer_size.width, 1),)
        return super().refresh(*regions, **kw)

    def render(self) -> Text:
        """The whole pane as one text (for text selection and for tests; drawing goes
        line by line through render_line)."""
        return Text("\n").join(self.texts)

    def render_line(self, y: int) -> Strip:
        style = self.visual_style.rich_style
        if self._strips_for != (style, self.size.width):
            self._strips.clear()
            self._strips_for = (style, self.size.width)
        strip = self._strips.get(y)
        if strip is None:
            if y < len(self.texts):
                strip = self._render_text(self.texts[y], style, y)
            else:  # below the text: blank, as a Static draws it
                strip = Strip.blank(self.size.width, style)
            self._strips[y] = strip
        return strip

    def _render_text(self, text: Text, base: RichStyle, y: int) -> Strip:
        console = self.app.console
        if "\n" in text.plain:  # one row per line: what follows a newline is not shown
            text = text.split("\n", allow_blank=True)[0]
        if "\t" in text.plain:
            text = text.copy()
            text.expand_tabs(8)
        if text.style:
            base = base + console.get_style(text.style)
        segments = []
        x = 0
        for seg in text.render(console, end=""):
            style = base + seg.style if seg.style else base
            # Textual's text selection finds a character by the offset in its style's meta.
            segments.append(Segment(seg.text, style + _offset(x, y)))
            x += cell_len(seg.text)
        return Strip(segments, x)


@functools.lru_cache(maxsize=16384)
def _offset(x: int, y: int) -> RichStyle:
    # One per cell position, made once: a line's every segment asks for one.
    return RichStyle.from_meta({"offset": (x, y)})


_PYTE_COLOURS = {"brown": "yellow", "brightbrown": "bright_yellow"}
# A screen frame's style flags, in the order their styles are written.
_FLAGS = (("b", "bold"), ("i", "italic"), ("u", "underline"), ("r", "reverse"))


def colour(name: str) -> str | None:
    if name == "default":
        return None
    if len(name) == 6 and all(c in "0123456789abcdefABCDEF" for c in name):
        return "#" + name
    name = _PYTE_COLOURS.get(name, name)
    if name.startswith("bright") and not name.startswith("bright_"):
        name = "bright_" + name[6:]
    return name


def screen_lines(frame: Answer) -> list[Text]:
    """A screen frame as Rich text, one per row, with the colours the daemon's model keeps
    (trailing blank rows left out)."""
    lines = frame["lines"]
    styles = frame.get("styles") or []
    last = len(lines)
    while last > 0 and not lines[last - 1]:
        last -= 1
    out = []
    for y, line in enumerate(lines[:last]):
        t = Text(mask(line), no_wrap=True, overflow="crop")
        for start, length, fg, bg, flags in styles[y] if y < len(styles) else []:
            parts = [style for flag, style in _FLAGS if flag in flags]
            f, b = colour(fg), colour(bg)
            if f:
                parts.append(f)
            if b:
                parts.append("on " + b)
            if parts:
                t.stylize(" ".join(parts), start, start + length)
        out.append(t)
    return out


def delivery_text(st: Answer) -> str:
    """A message's delivery states on one line: `woken 05:44:11.448, active ...`."""
    out = []
    for x in st["states"]:
        why = x.get("reason") or x.get("by") or ""
        out.append(f"{x['state']}{f' ({why})' if why else ''} {x['at'][11:23]}")
    return ", ".join(out)
