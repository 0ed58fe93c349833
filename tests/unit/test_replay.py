"""The attach replay (benchd/runtime/vt.py): output laid out at the session's size,
written again as lines with colours, the cursor put back, for any viewer width."""

from benchd.runtime.vt import replay


def test_lines_keep_their_colours_and_the_cursor_goes_back():
    out = replay(b"\x1b[1;31mred\x1b[0m plain\r\nnext> ", 5, 20, 80, cut=False).decode()
    assert out.startswith("\x1b[0m\x1b[0;1;31mred\x1b[0m plain\r\nnext>")
    assert out.endswith("\r\x1b[6C")  # on the last row, after "next> "


def test_a_cut_starts_at_the_next_line():
    # the first bytes are the tail of an escape sequence: never shown as text
    out = replay(b"5;31mjunk\r\nkept\r\n", 5, 20, 80, cut=True).decode()
    assert "junk" not in out and "5;31m" not in out and "kept" in out


def test_the_cursor_counts_the_viewers_rows_for_a_line_wider_than_the_viewer():
    # a 30-column row of x on a 40-column session, the cursor on the row above it
    out = replay(b"top\r\n" + b"x" * 30 + b"\x1b[1A\r\x1b[2C", 5, 40, 20, cut=False).decode()
    # the x row takes two rows of a 20-column viewer: up two, then right two
    assert out.endswith("\x1b[2A\r\x1b[2C"), repr(out)


def test_wide_characters_and_nothing_at_all():
    assert "中文" in replay("中文 ok\r\n".encode(), 3, 10, 80, cut=False).decode()
    assert replay(b"", 3, 10, 80, cut=False) == b""
