"""Untrusted text on a terminal: which characters may not reach it as they are, and why
(docs/cli.md, "Untrusted text on your terminal"). The one home of that rule: the CLI's
human output (`escape`), the dashboard (`mask`) and the wake line typed into a pty
(`strip`) all use it.

No imports: the CLI's fast path (`bench mail read`) prints through this module.
"""

TYPE_CHECKING = False  # `typing` costs the fast path an import: for the type checker only
if TYPE_CHECKING:
    from collections.abc import Callable

# Unicode's Bidi_Control set.
BIDI_CONTROLS = frozenset((0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def unsafe(c: int) -> bool:
    """Whether code point `c` may not reach a terminal as it is."""
    if c < 0x20:
        return c not in (9, 10)
    if c < 0x7F:
        return False
    if c < 0xA0:
        return True  # DEL and C1
    if c in BIDI_CONTROLS:
        return True
    return 0xE000 <= c <= 0xF8FF or c >= 0xF0000  # private use (planes 15 and 16 whole)


class _Table(dict[int, str]):
    """A str.translate table filled in on first sight of each character: the rule is a
    function, the private-use planes hold 130,000 code points, and a text uses few."""

    def __init__(
        self, replace: "Callable[[int], str]", test: "Callable[[int], bool]" = unsafe
    ) -> None:
        super().__init__()
        self._replace, self._test = replace, test

    def __missing__(self, c: int) -> str:
        value = self._replace(c) if self._test(c) else chr(c)
        self[c] = value
        return value


def _escaped(c: int) -> str:
    if c < 0x80:  # C0 and DEL as the bytes they are; C1 (a character, not a byte) as \u
        return f"\\x{c:02x}"
    if c < 0x10000:
        return f"\\u{c:04x}"
    return f"\\U{c:08x}"


_ESCAPE = _Table(_escaped)
_MASK = _Table(lambda c: "\ufffd")
_STRIP = _Table(lambda c: "", lambda c: c in (9, 10) or unsafe(c))  # one line: no tab, newline


def escape(text: str) -> str:
    """Each unsafe character as \\xNN (C0, DEL), \\uNNNN or \\UNNNNNNNN; tab and newline
    stay. Its output is all safe, so escaping twice changes nothing more."""
    return text.translate(_ESCAPE)


def mask(text: str) -> str:
    """Each unsafe character as U+FFFD: one character for one, for panes whose styles are
    placed by character offset (the dashboard)."""
    return text.translate(_MASK)


def strip(text: str) -> str:
    """The text without its unsafe characters, tabs and newlines: what is left is one line,
    fit to be typed into a pty."""
    return text.translate(_STRIP)
