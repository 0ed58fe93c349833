"""benchd.runtime.vt: nothing a program prints after a format character is lost
from the screen, and bidi controls show masked."""

import pyte

from benchd.runtime import vt


def _row(screen_cls, text: str) -> str:
    screen = screen_cls(40, 2)
    pyte.ByteStream(screen).feed(text.encode())
    return screen.display[0].rstrip()


def test_text_after_a_bidi_control_or_a_zero_width_character_is_drawn():
    line = "abc\u202edef \u200bghi \u2066jkl\u2069 e\u0301"
    # pyte itself stops at the first of them: what follows is lost.
    assert _row(pyte.Screen, line) == "abc"
    got = _row(vt.Screen, line)
    assert got == "abc\ufffddef ghi \ufffdjkl\ufffd \u00e9", got


def test_private_use_and_wide_characters_keep_their_cells():
    got = _row(vt.Screen, "a\ue01fb \u4e2dc")
    assert got == "a\ue01fb \u4e2dc", got  # the dashboard masks private use when it shows it
