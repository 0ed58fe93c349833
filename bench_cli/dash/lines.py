"""A pane of lines where a line that changes is repainted alone: the base of every pane.

A Static redraws its whole text on every update, and Textual then composes every line of
the screen area it covers. Here the owner hands over the pane's lines (Rich Text, one per
row) and only the rows whose text differs from what is shown are rendered again and
marked dirty, so an event that changes one session's row costs one line, not the pane,
and the rest of the screen is not composed again. Lines are rendered by Textual's own
text pipeline (the same one a Static uses), so a pane looks exactly as it would as a
Static, text selection included.
"""

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget


class Lines(Widget):
    def __init__(self, **kw):
        super().__init__(**kw)
        self._texts: list[Text] = []
        self._strips: dict[int, Strip] = {}  # y -> the rendered line
        self._by_text: dict[tuple, Strip] = {}  # a line's text -> it rendered as row 0
        self._strips_for: tuple = ()  # the style and width the strips were rendered for

    def set_lines(self, texts: list[Text]) -> None:
        """Show these lines (top first); repaint the rows whose text changed."""
        old, self._texts = self._texts, texts
        width = self.size.width
        if not width:
            self.refresh()
            return
        dirty: list[Region] = []
        for y in range(max(len(old), len(texts))):
            if y < len(old) and y < len(texts) and old[y] == texts[y]:
                continue
            self._strips.pop(y, None)
            if dirty and dirty[-1].bottom == y:  # extend the run of changed rows
                last = dirty.pop()
                dirty.append(Region(0, last.y, width, last.height + 1))
            else:
                dirty.append(Region(0, y, width, 1))
        if dirty:
            self.refresh(*dirty)

    @property
    def texts(self) -> list[Text]:
        return self._texts

    def render(self) -> Text:
        """The whole pane as one text (for text selection and for tests; drawing goes
        line by line through render_line)."""
        return Text("\n").join(self._texts)

    def render_line(self, y: int) -> Strip:
        style, width = self.visual_style, self.size.width
        if self._strips_for != (style, width):
            self._strips.clear()
            self._by_text.clear()
            self._strips_for = (style, width)
        strip = self._strips.get(y)
        if strip is None:
            if y < len(self._texts):
                strip = self._rendered(self._texts[y], style, width)
            else:  # below the text: blank, as a Static draws it
                strip = Strip.blank(width, style.rich_style)
            if y:
                strip = _to_row(strip, y)
            self._strips[y] = strip
        return strip

    def _rendered(self, text: Text, style, width: int) -> Strip:
        """A line rendered as row 0, by its text: a line that moves to another row (the
        events pane scrolls by one at each event) is not rendered again."""
        key = (text.plain, str(text.style), tuple(text.spans))
        strip = self._by_text.get(key)
        if strip is None:
            strips = Visual.to_strips(self, visualize(self, text), width, 1, style)
            strip = strips[0] if strips else Strip.blank(width, style.rich_style)
            if len(self._by_text) > 4 * max(8, self.size.height):
                self._by_text.clear()
            self._by_text[key] = strip
        return strip


def _to_row(strip: Strip, y: int) -> Strip:
    """A line rendered on its own (as row 0) moved to row y: Textual's text selection
    finds a character by the (x, y) offset each segment's style carries."""
    out = []
    for seg in strip:
        style = seg.style
        if style is not None and style._meta:
            offset = style.meta.get("offset")
            if offset is not None:
                style = style + RichStyle.from_meta({"offset": (offset[0], y)})
        out.append(Segment(seg.text, style, seg.control))
    return Strip(out, strip.cell_length)
