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
            pane.clear()
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
