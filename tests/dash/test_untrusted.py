"""bench dash shows untrusted text masked: a session's screen and a mail's subject with
bidi controls and private-use characters reach the operator's terminal as U+FFFD, never
as themselves. Through Textual's pilot against a real daemon and a real session."""

import asyncio
import sys
import time

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")

from bench_cli.dash.app import Dash, Source  # noqa: E402
from tests.conftest import spawn  # noqa: E402

HOSTILE = "\u202eDESREVER\u202c \ue01fRED\ue0ff \u2066iso\u2069"
SHOWN = "\ufffdDESREVER\ufffd \ufffdRED\ufffd \ufffdiso\ufffd"
FORBIDDEN = ("\u202e", "\u202c", "\ue01f", "\ue0ff", "\u2066", "\u2069")


async def until(pilot, pred, what: str, timeout: float = 20.0):  # noqa: ASYNC109 - asyncio
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def text_of(app, pane: str) -> str:
    return str(app.query_one(pane).render())


def test_screen_and_subject_are_masked(make_daemon):
    d = make_daemon()
    # Private use only on the screen: the daemon's VT model (pyte) stops drawing a write at
    # a bidi control, so those never reach a frame (screen_lines is tested with them).
    show = "import time; print('top \\ue01fRED\\ue0ff x', flush=True); time.sleep(600)"
    spawn(d, sys.executable, "-c", show, name="hostile")
    d.wait_until(lambda: "top" in d.bench("tail", "hostile", "--screen").out, 30, "its screen")
    d.ok("mail", "send", "hostile", "-s", HOSTILE, "-m", "body")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "hostile" in app.board.rows, "the session")
            app.select("hostile")
            await until(pilot, lambda: "top" in text_of(app, "#screen"), "the screen pane")
            await until(pilot, lambda: "DESREVER" in text_of(app, "#mail"), "the mail pane")
            for pane in ("#screen", "#mail"):
                shown = text_of(app, pane)
                assert not any(c in shown for c in FORBIDDEN), (pane, shown)
            assert "top \ufffdRED\ufffd x" in text_of(app, "#screen")
            assert SHOWN in text_of(app, "#mail")

    asyncio.run(go())
