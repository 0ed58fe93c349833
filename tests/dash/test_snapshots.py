"""Snapshots of the dashboard's layouts and every dialog at 80x24 and 120x40
(pytest-textual-snapshot), and the main layout at 160x48 for the README's picture.

The app is fed a canned source (tests/dash/canned.py) so the pictures are the same on
every run; `--snapshot-update` rewrites them after an intended change. The README's
screenshot is made from the 160x48 one (tests/dash/screenshot.py). At 80 columns every
hint and dialog must show whole: the texts are checked here too, not only pictured.
"""

import os
import time

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")
pytest.importorskip("pytest_textual_snapshot", reason="snapshot tests need the dev extra")

from textual.widgets import Input, Label, Static  # noqa: E402

from bench_cli.dash.app import Dash  # noqa: E402
from tests.dash.canned import EVENTS, CannedSource  # noqa: E402

SIZES = [(80, 24), (120, 40)]
SIZE_IDS = ["80x24", "120x40"]


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")  # the events pane shows local clock times
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def canned_app() -> Dash:
    return Dash(CannedSource(), clock=lambda: 1000.0)


async def loaded(pilot) -> None:
    app = pilot.app
    for _ in range(200):
        if (
            app.board.last_seq == EVENTS[-1]["seq"]
            and app.mail_rows
            and "standin" in str(app.query_one("#screen").render())
        ):
            break
        await pilot.pause(0.02)
    await pilot.pause()


@pytest.mark.parametrize("size", [*SIZES, (160, 48)], ids=[*SIZE_IDS, "160x48"])
def test_main_layout(snap_compare, size):
    assert snap_compare(canned_app(), terminal_size=size, run_before=loaded)


def _opened(*keys: str, dialog: str):
    """run_before: load, press the keys, wait for the dialog, and check that none of its
    texts is wider than the space it has (so nothing is cut, whatever the picture)."""

    async def run_before(pilot):
        await loaded(pilot)
        if dialog == "thread":
            pilot.app.mail_pane.focus()
        await pilot.press(*keys)
        for _ in range(200):
            if pilot.app.screen.name == dialog:
                break
            await pilot.pause(0.02)
        assert pilot.app.screen.name == dialog
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False  # a blinking cursor would be caught on or off
        await pilot.pause()
        for w in pilot.app.screen.query(Static):
            if isinstance(w, Label) or w.parent.__class__.__name__ == "Vertical":
                text = str(w.render())
                lines = text.splitlines() or [""]
                assert max(map(len, lines)) <= w.content_size.width, (dialog, text)

    return run_before


DIALOGS = {  # the test's name: the keys, the dialog's name
    "help": (("question_mark",), "help"),
    "type": (("t",), "type"),
    "search": (("slash",), "search"),
    "filter": (("f",), "filter"),
    "compose": (("m",), "compose"),
    "kill": (("k",), "confirm"),
    "thread": (("enter",), "thread"),
}


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name", list(DIALOGS))
def test_dialog(snap_compare, name, size):
    keys, dialog = DIALOGS[name]
    assert snap_compare(canned_app(), terminal_size=size, run_before=_opened(*keys, dialog=dialog))


def test_snapshots_are_stored():
    here = os.path.join(os.path.dirname(__file__), "__snapshots__", "test_snapshots")
    assert os.path.isdir(here), "run pytest tests/dash --snapshot-update once"
    names = [n for n in os.listdir(here) if n.endswith(".svg")]
    assert len(names) >= 3 + 2 * len(DIALOGS), names


def test_the_readme_picture_is_made_from_the_current_snapshot():
    from tests.dash.screenshot import PNG, SOURCE, svg_digest

    assert os.path.exists(PNG), "run just dash-screenshot"
    with open(SOURCE) as f:
        recorded = f.read().split()[0]
    assert recorded == svg_digest(), "the snapshot changed: run just dash-screenshot"


def _sessions_text(size):
    import asyncio

    async def go():
        app = canned_app()
        async with app.run_test(size=size) as pilot:
            await loaded(pilot)
            footer = " ".join(str(w.render()) for w in app.query("FooterKey"))
            return [t.plain for t in app.sessions_pane.texts], footer

    return asyncio.run(go())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_sessions_pane_keeps_unread_and_pid_and_lists_exited_sessions_last(size):
    lines, footer = _sessions_text(size)
    head, rows = lines[0].split(), lines[1:]
    assert head[:3] == ["handle", "state", "unread"] and head[-1] == "pid", lines
    for line, pid in zip(rows, ("4101", "4102", "4103", "4104"), strict=True):
        assert line.rstrip().endswith(pid), lines  # the pid whole, never cut
    if size[0] >= 100:
        assert head[-2] == "job" and "job->alice" in rows[2]  # carol's job
    else:
        # Too narrow for a job cell that says anything: the column goes, unread stays.
        assert "job" not in head and "job" not in "".join(rows), lines
    assert rows[1].split()[:3] == ["bob", "running", "0"], lines
    # the exited session (fixer, exit 0) after every live one
    assert rows[-1].startswith("fixer") and "exit 0" in rows[-1]
    assert "palette" not in footer, footer


def test_a_narrow_pane_leaves_columns_out_in_order_then_cuts():
    from bench_cli.dash.app import JOB_SAYS
    from bench_cli.dash.panes import fit

    steps = ((4, 0), (3, 0), (5, JOB_SAYS), (5, 0), (2, 0))
    widths = (6, 7, 6, 4, 14, 27, 4)  # handle state unread idle wake job pid
    assert fit(widths, 200, steps) == widths
    assert fit(widths, 70, steps) == (6, 7, 6, 4, 0, 27, 4)
    assert fit(widths, 52, steps) == (6, 7, 6, 0, 0, 21, 4)
    assert fit(widths, 43, steps) == (6, 7, 6, 0, 0, 12, 4)
    assert fit(widths, 39, steps) == (6, 7, 6, 0, 0, JOB_SAYS, 4)
    # A job cell narrower than JOB_SAYS says nothing: the job goes before unread.
    assert fit(widths, 34, steps) == (6, 7, 6, 0, 0, 0, 4)
    assert fit(widths, 24, steps) == (6, 7, 0, 0, 0, 0, 4)
