"""The daemon's screen model: pyte's Screen, with one repair.

pyte draws a run of text character by character and stops at the first one that takes
no cell and combines with nothing (a bidi control, a zero-width space, a zero-width
joiner inside an emoji): the rest of that write is lost, so a screen could hide what a
program printed after such a character. Here each such character is replaced before
drawing: a bidi control by U+FFFD (it is shown masked, as bench_wire.untrusted has it
for every terminal of ours), any other by nothing.
"""

import unicodedata

import pyte
from wcwidth import wcwidth

from bench_wire.untrusted import BIDI_CONTROLS

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
