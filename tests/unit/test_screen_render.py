"""The incremental screen renderer draws exactly what pyte's `display` draws.

`benchd.runtime.terminal.render_line` touches only the written cells of a line (a 500x1000
screen is mostly blank) and `Terminal._render` redraws only the lines pyte marked
dirty; both must agree with pyte's full rendering, wide characters included. The
reference is pyte's `display` algorithm cell by cell, except that an empty cell (the
stub of a wide character, moved onto by the cursor) renders as nothing instead of
raising IndexError as pyte 0.8's `display` does.
"""

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st
from wcwidth import wcwidth

from benchd.runtime.terminal import render_line

pieces = st.sampled_from(
    [
        "abc",
        "漢字",
        "é",
        "\r\n",
        "\x1b[2J",
        "\x1b[H",
        "\x1b[5;7H",
        "\x1b[K",
        "\x1b[1m",
        "\t",
        "\x1b[3A",
        "😀",
        "x" * 30,
        "\x1b[?1049h",
        "\x1b[?1049l",
        "\b",
        "ｗｉｄｅ",
    ]
)


def rendered(screen: pyte.Screen) -> list[str]:
    return [render_line(screen.buffer[y], screen.columns) for y in range(screen.lines)]


def display(screen: pyte.Screen) -> list[str]:
    out = []
    for y in range(screen.lines):
        line, cells, wide = screen.buffer[y], [], False
        for x in range(screen.columns):
            if wide:  # the stub after a wide character
                wide = False
                continue
            data = line[x].data
            wide = bool(data) and wcwidth(data[0]) == 2
            cells.append(data)
        out.append("".join(cells))
    return out


@settings(max_examples=200)
@given(
    chunks=st.lists(st.lists(pieces, max_size=12).map("".join), min_size=1, max_size=6),
    rows=st.integers(1, 12),
    cols=st.integers(1, 40),
)
def test_render_matches_pyte_display(chunks, rows, cols):
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    lines = rendered(screen)
    screen.dirty.clear()
    for chunk in chunks:
        stream.feed(chunk)
        # Incrementally, as the terminal does it: only the dirty lines again.
        for y in screen.dirty:
            if y < rows:
                lines[y] = render_line(screen.buffer[y], cols)
        screen.dirty.clear()
        assert lines == display(screen)


def test_the_reference_is_pyte_display_where_pyte_can_render():
    screen = pyte.Screen(20, 4)
    pyte.Stream(screen).feed("ab漢字c\r\n\x1b[1mbold\x1b[0m 😀 end")
    assert display(screen) == screen.display
