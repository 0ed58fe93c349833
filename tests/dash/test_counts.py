"""The dashboard's sessions pane after a handle changes hands (issue 40, defects 3 and 4):
a new session under an old handle shows its mailbox's unread count (the same as
`bench mail list`), and only its own job, not an earlier session's."""

import asyncio
import time

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")

from bench_cli.dash.app import Dash, Source  # noqa: E402
from tests.conftest import spawn_standin  # noqa: E402

SIZE = (100, 30)


async def until(pilot, pred, what: str, timeout: float = 30.0):  # noqa: ASYNC109 - asyncio
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def test_unread_after_kill_respawn_and_send_is_the_mailboxs(make_daemon):
    d = make_daemon("--idle-gate", "600")  # no wakes: every message stays unread
    first = spawn_standin(d, "alice")
    d.ok("mail", "send", "alice", "-m", "one")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.connected and "alice" in app.board.rows, "alice")
            await until(pilot, lambda: app.board.rows["alice"].unread == 1, "1 unread")
            d.ok("kill", "alice")
            await until(
                pilot,
                lambda: (
                    app.board.rows["alice"].session == first["session"]
                    and app.board.rows["alice"].state == "exited"
                ),
                "alice exited",
            )
            d.ok("mail", "send", "alice", "-m", "two")
            again = spawn_standin(d, "alice")
            d.ok("mail", "send", "alice", "-m", "three")
            listed = d.ok("mail", "list", "--handle", "alice")["total"]
            assert listed == 3
            await until(
                pilot,
                lambda: (
                    app.board.rows["alice"].session == again["session"]
                    and app.board.rows["alice"].unread == listed
                ),
                f"alice's row with {listed} unread",
                timeout=10,
            )

    asyncio.run(go())
