"""bench dash through Textual's pilot, against a real daemon with stand-in agents.

The app runs in the test's asyncio loop (asyncio.run: the suite's own async mode is
trio); every wait is on a condition with a deadline, never a fixed sleep.
"""

import asyncio
import time

import pytest

pytest.importorskip("textual", reason="bench dash needs the dash extra (./run installs it)")

from bench_cli.dash.app import Dash, Source  # noqa: E402
from tests.conftest import spawn, spawn_standin  # noqa: E402

SIZE = (100, 30)


async def until(pilot, pred, what: str, timeout: float = 20.0):  # noqa: ASYNC109 - asyncio
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def rows(app) -> dict:
    return {h: r for h, r in app.board.rows.items()}


def screen_of(app) -> str:
    return str(app.query_one("#screen").render())


def run(coro):
    asyncio.run(coro)


def test_sessions_screen_mail_and_events_follow_the_daemon(make_daemon):
    d = make_daemon()
    spawn_standin(d, "alice")
    spawn_standin(d, "bob")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: set(rows(app)) == {"alice", "bob"}, "both sessions")
            # The rows come from the snapshot; connected is set once it has been taken.
            await until(pilot, lambda: app.connected, "connected")
            await until(pilot, lambda: "standin agent alice" in screen_of(app), "alice's screen")
            # Mail to bob: its unread count changes from the event stream.
            d.ok("mail", "send", "bob", "-s", "hello bob", "-m", "first")
            await until(
                pilot,
                lambda: rows(app)["bob"].unread == 1 or rows(app)["bob"].wake.startswith("woken"),
                "bob's unread or wake",
            )
            # Select bob (down arrow in the sessions table): screen and mail follow.
            app.query_one("#sessions").focus()
            await pilot.press("down")
            await until(pilot, lambda: app.selected == "bob", "bob selected")
            await until(pilot, lambda: "standin agent bob" in screen_of(app), "bob's screen")
            await until(
                pilot,
                lambda: any(m["subject"] == "hello bob" for m in app.mail_rows),
                "bob's mail listed",
            )
            # the events pane shows the send
            await until(
                pilot,
                lambda: any(e["kind"] == "mail/sent" for e in app.board.events),
                "the mail/sent event",
            )

    run(go())


def test_type_mail_kill_search_and_open_without_retiring(make_daemon):
    d = make_daemon("--idle-gate", "60")  # no wakes: mail stays unread unless retired
    spawn_standin(d, "alice")
    mid = d.ok("mail", "send", "alice", "-s", "needle subject", "-m", "the haystack body")[
        "mail_id"
    ]

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.selected == "alice", "alice selected")
            # t: type a line into the session
            await pilot.press("t")
            await until(pilot, lambda: app.screen.name == "type", "the type dialog")
            await pilot.press(*"hi there", "enter")
            await until(pilot, lambda: "ok: hi there" in screen_of(app), "the typed line run")
            # m: mail as operator
            await pilot.press("m")
            await until(pilot, lambda: app.screen.name == "compose", "compose")
            await pilot.press("enter", *"greetings", "enter", *"from the dash", "enter")
            await until(
                pilot,
                lambda: any(
                    m["subject"] == "greetings"
                    for m in d.ok("mail", "list", "--handle", "alice")["messages"]
                ),
                "the mail sent",
            )
            # Enter on a mail opens its thread; Escape closes; it is still unread.
            await until(pilot, lambda: len(app.mail_rows) == 2, "two mails listed")
            app.query_one("#mail").focus()
            await pilot.press("enter")
            await until(pilot, lambda: app.screen.name == "thread", "the thread")
            # the message's delivery states, as its sender sees them
            assert "delivery: delivered" in app.screen.text, app.screen.text
            await pilot.press("escape")
            listed = d.ok("mail", "list", "--handle", "alice")["messages"]
            assert {m["mail_id"] for m in listed} >= {mid}  # still unread
            # ... and r in the thread view retires it
            await pilot.press("enter")
            await until(pilot, lambda: app.screen.name == "thread", "the thread")
            await pilot.press("r")
            await until(
                pilot,
                lambda: (
                    mid
                    not in {
                        m["mail_id"] for m in d.ok("mail", "list", "--handle", "alice")["messages"]
                    }
                ),
                "the mail retired",
            )
            # /: search, from the sessions pane
            app.sessions_pane.focus()
            await pilot.press("slash")
            await until(pilot, lambda: app.screen.name == "search", "search dialog")
            await pilot.press(*"haystack", "enter")
            await until(
                pilot, lambda: [m["mail_id"] for m in app.mail_rows] == [mid], "the search hit"
            )
            # The results have the focus: Enter opens the hit's thread straight away.
            await until(pilot, lambda: app.focused is app.mail_pane, "the results focused")
            await pilot.press("enter")
            await until(pilot, lambda: app.screen.name == "thread", "the hit")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen.__class__.__name__ == "DashScreen", "back")
            await pilot.press("escape")
            await until(pilot, lambda: app.search_query is None, "the search left")
            # ?: help, then k: kill after confirmation (n first: nothing happens)
            await pilot.press("question_mark")
            await until(pilot, lambda: app.screen.name == "help", "help")
            await pilot.press("escape")
            await pilot.press("k")
            await until(pilot, lambda: app.screen.name == "confirm", "confirm")
            await pilot.press("n")
            await pilot.pause(0.2)
            assert rows(app)["alice"].state == "running"
            await pilot.press("k")
            await until(pilot, lambda: app.screen.name == "confirm", "confirm")
            await pilot.press("y")
            await until(pilot, lambda: rows(app)["alice"].state == "exited", "alice killed")
            await pilot.press("q")

    run(go())


def status_of(app) -> str:
    return str(app.query_one("#status").render())


def test_reconnects_after_the_daemon_restarts_and_shows_the_new_daemons_sessions(make_daemon):
    d = make_daemon()
    spawn_standin(d, "alice")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.connected and "alice" in rows(app), "connected")
            await until(pilot, lambda: "standin agent alice" in screen_of(app), "alice's screen")
            await asyncio.get_running_loop().run_in_executor(None, d.bench, "down")
            await until(pilot, lambda: not app.connected, "the daemon seen gone")
            await until(pilot, lambda: "next try in" in status_of(app), "the wait shown")
            assert "not running" in status_of(app)
            await asyncio.get_running_loop().run_in_executor(None, d.start)
            await until(pilot, lambda: app.connected, "reconnected", 30)
            # alice went with the old daemon; the new one remembers her as exited (her
            # record is kept on disk), so her row says so: never a stale "running" or "?".
            await until(
                pilot,
                lambda: "alice" in rows(app) and rows(app)["alice"].state == "exited",
                "alice's row from the new daemon",
            )
            await asyncio.get_running_loop().run_in_executor(None, spawn_standin, d, "carol")
            await until(
                pilot,
                lambda: "carol" in rows(app) and rows(app)["carol"].state == "running",
                "a session after the restart",
            )
            # alice (exited) is still the selection; exited sessions are listed after
            # the live ones, so carol is the row above.
            assert [k for k in app.sessions_pane.keys] == ["carol", "alice"]
            await pilot.press("up")
            await until(pilot, lambda: "standin agent carol" in screen_of(app), "carol's screen")

    run(go())


def test_a_session_of_the_same_name_after_a_restart_is_followed_again(make_daemon):
    d = make_daemon()
    spawn_standin(d, "alice")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "standin agent alice" in screen_of(app), "alice's screen")
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, d.bench, "down")
            await until(pilot, lambda: not app.connected, "the daemon seen gone")
            await loop.run_in_executor(None, d.start)
            # Reconnected first: the new daemon lists the old alice as exited, so the
            # dash follows her ended screen until the new alice's spawn event comes.
            await until(pilot, lambda: app.connected, "reconnected", 30)
            argv = ("bash", "-c", "echo the second alice; exec sleep 600")
            await loop.run_in_executor(None, lambda: spawn(d, *argv, name="alice"))
            await until(
                pilot, lambda: "the second alice" in screen_of(app), "the new alice's screen"
            )

    run(go())


def test_no_daemon_waits_longer_between_attempts_and_says_so(make_daemon):
    d = make_daemon(start=False)

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "next try in" in status_of(app), "the first wait")
            # The wait doubles (0.25, 0.5, 1 s ...): the status line shows the one now.
            await until(pilot, lambda: app.retry_in >= 1, "a longer wait")
            assert f"next try in {app.retry_in:g}s" in status_of(app)
            await asyncio.get_running_loop().run_in_executor(None, d.start)
            await until(pilot, lambda: "connected to" in status_of(app), "connected", 30)

    run(go())


def test_idle_times_are_right_from_the_first_frame(make_daemon):
    d = make_daemon("--idle-gate", "0.2")
    spawn_standin(d, "alice")
    d.ok("mail", "send", "alice", "-m", "wake up")
    d.wait_event("agent/woken", lambda e: e["handle"] == "alice")

    def idle_s() -> float:
        return d.ok("ps")["sessions"][0]["idle_ms"] / 1000

    d.wait_until(lambda: idle_s() >= 4, 60, "alice idle for 4 s")

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            # Connected comes before the history stream is read: wait for the past wake
            # to reach alice's row, then look at the idle time it shows.
            await until(
                pilot,
                lambda: (
                    app.connected
                    and "alice" in app.board.rows
                    and app.board.rows["alice"].wake.startswith("woken")
                ),
                "alice's row with its past wake",
            )
            line = next(t.plain for t in app.sessions_pane.texts if t.plain.startswith("alice"))
            # the wake (in the history the dashboard reads at start) is not "now"
            shown = line.split()[3]
            unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[shown[-1]]
            assert int(shown[:-1]) * unit >= 4, line

    run(go())


def test_a_big_mailbox_shows_its_newest_messages(make_daemon):
    d = make_daemon()
    spawn_standin(d, "alice")
    with d.connect() as c:
        for i in range(620):
            c.send({"verb": "mail/send", "to": "alice", "body": "b", "subject": f"m{i}"})
            assert c.recv()["ok"]

    async def go():
        app = Dash(Source(d.dir))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.mail_rows) == 200, "the mail pane")
            subjects = {m["subject"] for m in app.mail_rows}
            assert "m619" in subjects and "m420" in subjects and "m419" not in subjects
            assert "newest 200 of 620" in str(app.query_one("#mail").border_title)

    run(go())


def test_the_recent_past_comes_through_the_socket_not_the_log_file(make_daemon):
    # The events before the dashboard started fill its events pane from the daemon's
    # `events` stream, the 200 up to hello's last_seq, even when the log file itself is
    # out of the dashboard's reach: only the daemon, which holds it open, reads it.
    import os

    from bench_wire import messages as m
    from bench_wire.client import Client
    from bench_wire.messages import StructCodec

    d = make_daemon()
    with Client(d.dir, codec=StructCodec()) as conn:
        for i in range(210):
            conn.call(m.MailSend(to="bob", subject=f"before {i}", body="x"))
        last = conn.call(m.Hello()).last_seq
    log = os.path.join(d.dir, "events.jsonl")
    os.chmod(log, 0)
    try:

        async def go():
            app = Dash(Source(d.dir))
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.connected, "connected")
                seqs = lambda: [e["seq"] for e in app.board.events]  # noqa: E731
                await until(pilot, lambda: last in seqs(), "the events up to the start")
                assert seqs() == list(range(last - 199, last + 1))
                d.ok("mail", "send", "bob", "-s", "after", "-m", "x")
                await until(pilot, lambda: seqs()[-1] > last, "the send after it started")

        run(go())
    finally:
        os.chmod(log, 0o600)
