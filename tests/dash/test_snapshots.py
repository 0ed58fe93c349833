"""Snapshots of the dashboard's main layouts at 80x24 and 160x48 (pytest-textual-snapshot).

The app is fed a canned source (tests/dash/canned.py) so the pictures are the same on
every run; `--snapshot-update` rewrites them after an intended change. The README's
screenshot is made from the 160x48 one (tests/dash/screenshot.py).
"""

import os
import time

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")
pytest.importorskip("pytest_textual_snapshot", reason="snapshot tests need the dev extra")

from bench_cli.dash.app import Dash  # noqa: E402
from tests.dash.canned import EVENTS, CannedSource  # noqa: E402


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


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_main_layout(snap_compare, size):
    assert snap_compare(canned_app(), terminal_size=size, run_before=loaded)


def test_help_at_80x24(snap_compare):
    async def help_open(pilot):
        await loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(canned_app(), terminal_size=(80, 24), run_before=help_open)


def test_snapshots_are_stored():
    here = os.path.join(os.path.dirname(__file__), "__snapshots__", "test_snapshots")
    assert os.path.isdir(here), "run pytest tests/dash --snapshot-update once"
    assert len([n for n in os.listdir(here) if n.endswith(".svg")]) >= 3


def test_the_readme_picture_is_made_from_the_current_snapshot():
    from tests.dash.screenshot import PNG, SOURCE, svg_digest

    assert os.path.exists(PNG), "run just dash-screenshot"
    with open(SOURCE) as f:
        recorded = f.read().split()[0]
    assert recorded == svg_digest(), "the snapshot changed: run just dash-screenshot"
