"""The panes' drawing rules, through Textual's pilot on the canned source (no daemon: the
wiring is tested against a real one in test_pilot.py)."""

import asyncio

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")

from rich.text import Text  # noqa: E402

from bench_cli.dash.app import Dash  # noqa: E402
from tests.dash.canned import EVENTS, CannedSource  # noqa: E402


async def loaded(pilot) -> None:
    """Until the canned events are in (the app's own writes come before the test's)."""
    for _ in range(500):
        if pilot.app.board.last_seq == EVENTS[-1]["seq"]:
            break
        await pilot.pause(0.01)
    assert pilot.app.board.last_seq == EVENTS[-1]["seq"], "the canned events never came"
    await pilot.pause()


def test_the_events_pane_jumps_by_half_its_height_when_full():
    async def go():
        app = Dash(CannedSource(), clock=lambda: 1000.0)
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(pilot)
            pane = app.events_pane
            rows = pane.content_size.height
            assert rows >= 4
            pane.lines.clear()
            pane.show()
            for i in range(rows):
                pane.write(f"line {i}")
            assert [t.plain for t in pane.texts] == [f"line {i}" for i in range(rows)]
            pane.write(f"line {rows}")  # full: the older half goes, the new line follows
            shown = [t.plain for t in pane.texts]
            assert shown == [f"line {i}" for i in range(rows - rows // 2, rows + 1)]
            assert len(pane.lines) == rows + 1  # the filter still sees every line

    asyncio.run(go())


def test_a_changed_line_is_repainted_alone():
    async def go():
        app = Dash(CannedSource(), clock=lambda: 1000.0)
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(pilot)
            pane = app.screen_pane
            for _ in range(500):  # the canned screen frame comes first: then the test's
                if "standin" in str(pane.render()):
                    break
                await pilot.pause(0.01)
            assert "standin" in str(pane.render()), "the canned screen never came"
            pane.set_lines([Text("one"), Text("two"), Text("three")])
            await pilot.pause()
            drawn = [pane.render_line(y) for y in range(3)]
            pane.set_lines([Text("one"), Text("TWO", style="bold"), Text("three")])
            after = [pane.render_line(y) for y in range(3)]
            assert after[0] is drawn[0] and after[2] is drawn[2]  # kept, not rendered again
            assert after[1] is not drawn[1]
            assert "".join(seg.text for seg in after[1]).startswith("TWO")
            assert any(seg.style and seg.style.bold for seg in after[1])
            assert str(pane.render()) == "one\nTWO\nthree"

    asyncio.run(go())


@pytest.mark.parametrize(
    "keys",
    [("q",), ("ctrl+c",), ("m", "ctrl+c"), ("slash", "x", "ctrl+c")],
    ids=["q", "ctrl+c", "ctrl+c in compose", "ctrl+c in an input"],
)
def test_q_and_ctrl_c_quit(keys):
    """^C leaves the dashboard from anywhere, as it leaves any terminal program."""

    async def go():
        app = Dash(CannedSource(), clock=lambda: 1000.0)
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(pilot)
            await pilot.press(*keys)
            for _ in range(500):
                if app._exit:
                    break
                await pilot.pause(0.01)
            assert app._exit, f"{keys} did not quit"
        assert app.return_code == 0

    asyncio.run(go())


def _cells(update, y: int, x1: int, x2: int) -> list[tuple[int, str, object]]:
    """The cells a partial update writes on row y between x1 and x2: (x, char, style)."""
    out = []
    for (x, strip), end in zip(update.chops[y].items(), update.chop_ends[y], strict=False):
        if strip is None or end <= x1 or x >= x2:
            continue
        lo = max(x, x1)
        for seg in strip.crop(lo - x, min(end, x2) - x):
            for ch in seg.text:
                out.append((lo, ch, seg.style))
                lo += 1
    return sorted(out, key=lambda c: c[0])


def test_a_partial_frame_draws_the_changed_rows_as_textual_would():
    """The main screen's compositor renders the bands of rows that changed; what it writes
    on those rows is what Textual's own compositor writes, cell for cell."""
    from textual._compositor import Compositor

    async def go():
        app = Dash(CannedSource(), clock=lambda: 1000.0)
        async with app.run_test(size=(120, 40)) as pilot:
            await loaded(pilot)
            await pilot.pause()
            screen = app.screen
            comp = screen._compositor
            # A session's row (top left), an event line (bottom right), the mail pane's
            # title and the screen pane: bands on both sides, one above the other.
            app.board.rows["bob"].unread = 7
            app.draw_sessions(only="bob")
            app.events_pane.write("12:00:00  mail/sent  operator -> bob  a test line")
            app.mail_pane.set_title("mail: a new title")
            app.screen_pane.set_lines([Text("changed"), Text("screen", style="bold red")])
            comp.update_widgets(
                {app.sessions_pane, app.events_pane, app.mail_pane, app.screen_pane}
            )
            dirty = set(comp._dirty_regions)
            assert len({r.y for r in dirty}) >= 4
            ours = comp.render_partial_update()
            comp._dirty_regions.update(dirty)
            theirs = Compositor.render_partial_update(comp)
            assert ours.spans == theirs.spans
            for y, x1, x2 in ours.spans:
                got = _cells(ours, y, x1, x2)
                assert [c[0] for c in got] == list(range(x1, x2)), f"row {y}: cells missing"
                assert got == _cells(theirs, y, x1, x2), f"row {y} differs"
            assert any("a new title" in "".join(c[1] for c in _cells(ours, *s)) for s in ours.spans)

    asyncio.run(go())
