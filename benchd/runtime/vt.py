"""The daemon's VT model: pyte's Screen with one repair (`Screen`), a session/screen frame
(`frame`), and what an attaching viewer is shown first (`replay`): recent output laid
out by a model of the session's size and sent as lines of text, since raw bytes written
for one width land in the wrong places in another.
"""

import collections
import unicodedata
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

import pyte
from pyte.screens import Char
from wcwidth import wcwidth

from bench_wire import messages as m
from bench_wire.untrusted import BIDI_CONTROLS

# pyte stops drawing a write at the first character that takes no cell and combines
# with nothing (a bidi control, a zero-width space), losing the rest: each is replaced
# before drawing (a bidi control masked, as bench_wire.untrusted has it).
MASK = "\ufffd"


class _Drawable(dict[int, str]):
    """A str.translate table filled in on first sight of each character (a screen sees
    few distinct ones), so drawing costs one C-level lookup a character."""

    def __missing__(self, c: int) -> str:
        ch = chr(c)
        width = wcwidth(ch)
        if c in BIDI_CONTROLS:
            value = MASK
        elif width > 0 or (width == 0 and unicodedata.combining(ch)):
            value = ch  # drawn (or combined) by pyte as it is
        else:
            value = ""  # takes no cell and combines with nothing: pyte would stop here
        self[c] = value
        return value


_DRAWABLE = _Drawable()


class Screen(pyte.Screen):
    def draw(self, data: str) -> None:
        super().draw(data.translate(_DRAWABLE))


HISTORY_LINES = 1000


class _Screen(Screen):
    """A screen that keeps the lines scrolled off its top. (pyte's HistoryScreen does too,
    but wraps every call in hooks for paging: five times slower to feed.)"""

    def __init__(self, cols: int, rows: int):
        super().__init__(cols, rows)
        self.history: collections.deque[Mapping[int, Char]] = collections.deque(
            maxlen=HISTORY_LINES
        )

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y == bottom and top == 0:  # the whole screen scrolls: a line leaves
            self.history.append(self.buffer[top])
        super().index()


_COLOURS = ["black", "red", "green", "brown", "blue", "magenta", "cyan", "white"]
_BASIC = {name: i for i, name in enumerate(_COLOURS)}
_BASIC["yellow"] = 3


def _colour(name: str, base: int) -> str:
    """An SGR parameter for one of pyte's colour names (base 30: fg, 40: bg)."""
    if name == "default":
        return ""
    bright = name.startswith("bright")
    plain = name[6:] if bright else name
    if plain in _BASIC:
        return str((base + 60 if bright else base) + _BASIC[plain])
    if len(name) == 6:
        try:
            r, g, b = (int(name[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return ""
        return f"{base + 8};2;{r};{g};{b}"
    return ""


# A Char's style: everything but its text (fg, bg, bold, italics, ...).
_Style = tuple[str, str, bool, bool, bool, bool, bool, bool]
_SGR_CACHE: dict[_Style, str] = {}


def _sgr(c: Char) -> str:
    key = c[1:]
    sgr = _SGR_CACHE.get(key)
    if sgr is None:
        if len(_SGR_CACHE) > 4096:
            _SGR_CACHE.clear()
        sgr = _SGR_CACHE[key] = _build_sgr(c)
    return sgr


def _build_sgr(c: Char) -> str:
    parts = ["0"]
    for on, code in (
        (c.bold, "1"),
        (c.italics, "3"),
        (c.underscore, "4"),
        (c.blink, "5"),
        (c.reverse, "7"),
        (c.strikethrough, "9"),
    ):
        if on:
            parts.append(code)
    for p in (_colour(c.fg, 30), _colour(c.bg, 40)):
        if p:
            parts.append(p)
    return "\x1b[" + ";".join(parts) + "m"


_PLAIN = "\x1b[0m"


def _line(line: Mapping[int, Char], cols: int) -> tuple[str, int]:
    """One model line as text with SGR codes, trailing blanks left out; and its width in
    cells."""
    out: list[str] = []
    style = _PLAIN
    width = 0  # cells up to the last one that shows something
    pending: list[str] = []  # blanks not yet known to be followed by more
    x = 0
    while x < cols:
        c = line[x]
        data = c.data
        if data == "":  # the right half of a wide character
            x += 1
            continue
        sgr = _sgr(c)
        cells = 2 if data and wcwidth(data[0]) == 2 else 1
        if data == " " and sgr == _PLAIN:
            pending.append(" ")
            x += cells
            continue
        if pending:
            if style != _PLAIN:
                out.append(_PLAIN)
                style = _PLAIN
            out.extend(pending)
            pending.clear()
        if sgr != style:
            out.append(sgr)
            style = sgr
        out.append(data)
        x += cells
        width = x
    if style != _PLAIN:
        out.append(_PLAIN)
    return "".join(out), width


def replay(data: bytes, rows: int, cols: int, viewer_cols: int, cut: bool) -> bytes:
    """`data` (a session's newest output; `cut`: older output came before it) as a
    rows x cols terminal shows it, for a viewer `viewer_cols` wide."""
    if cut:
        # Start at a line's start: the cut may have split an escape sequence.
        nl = data.find(b"\n")
        data = data[nl + 1 :] if nl >= 0 else b""
    screen = _Screen(cols, rows)
    pyte.ByteStream(screen).feed(data)
    lines = [_line(line, cols) for line in screen.history]
    history = len(lines)
    lines += [_line(screen.buffer[y], cols) for y in range(rows)]
    cy, cx = history + screen.cursor.y, min(screen.cursor.x, cols - 1)
    # Blank rows below both the cursor and the last text are left out.
    last = len(lines) - 1
    while last > cy and not lines[last][1]:
        last -= 1
    lines = lines[: last + 1]
    if not any(w for _, w in lines) and cx == 0:
        return b""
    out = [_PLAIN, "\r\n".join(text for text, _ in lines)]
    # Put the cursor back: count the viewer's rows below it (a line wider than the
    # viewer takes several).
    vcols = max(1, viewer_cols)

    def taken(width: int) -> int:
        return max(1, -(-width // vcols))

    row = min(cx // vcols, taken(lines[cy][1]) - 1)  # the viewer's row within its line
    col = min(cx - row * vcols, vcols - 1)
    up = sum(taken(w) for _, w in lines[cy + 1 :]) + taken(lines[cy][1]) - 1 - row
    if up > 0:
        out.append(f"\x1b[{up}A")
    out.append("\r")
    if col:
        out.append(f"\x1b[{col}C")
    return "".join(out).encode()


T = TypeVar("T")
# One run of cells not in the default style, per line of a session/screen frame:
# [start column, length, fg, bg, flags] (pyte's colour names or hex; flags b, i, u, r).
Run = list[int | str]


class Inspectable(Protocol):
    """A terminal whose screen can be looked at in a worker thread (a live session's
    Terminal, or an exited one's PastTerminal)."""

    async def inspect(self, fn: Callable[[pyte.Screen, list[str]], T]) -> T: ...


def _runs(screen: pyte.Screen, rows: int, cols: int) -> list[list[Run]]:
    out = []
    buf = screen.buffer
    for y in range(rows):
        line = buf[y]
        runs: list[Run] = []
        # The run being extended (always runs[-1]): its start, length and style.
        cur: tuple[int, int, tuple[str, str, str]] | None = None
        for x in range(cols):
            c = line[x]
            flags = (
                ("b" if c.bold else "")
                + ("i" if c.italics else "")
                + ("u" if c.underscore else "")
                + ("r" if c.reverse else "")
            )
            style = (c.fg, c.bg, flags)
            if style == ("default", "default", ""):
                cur = None
                continue
            if cur is not None and cur[0] + cur[1] == x and cur[2] == style:
                cur = (cur[0], cur[1] + 1, style)
                runs[-1][1] = cur[1]
            else:
                cur = (x, 1, style)
                runs.append([x, 1, *style])
        out.append(runs)
    return out


async def frame(rid: m.Id, term: Inspectable) -> m.ScreenFrame:
    """The screen now, rendered off the loop (a big screen must not stall other clients)."""

    def build(sc: pyte.Screen, lines: list[str]) -> m.ScreenFrame:
        lines = [line.rstrip() for line in lines]
        return m.ScreenFrame(
            id=rid,
            lines=lines,
            cursor_row=sc.cursor.y,
            cursor_col=sc.cursor.x,
            rows=sc.lines,
            cols=sc.columns,
            styles=_runs(sc, sc.lines, sc.columns),
        )

    return await term.inspect(build)
