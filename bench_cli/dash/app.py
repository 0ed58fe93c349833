"""The dashboard app (docs/dashboard.md): one event stream, reconnected when the daemon
comes back, drives the sessions and events panes; the selected session's screen is a
follow stream; a mail pane is fetched when its mailbox is chosen or its mail changes.
"""

import asyncio
import gc
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import msgspec
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.driver import Driver
from textual.screen import Screen
from textual.widgets import Footer, Static

from bench_cli import output
from bench_cli.dash.lines import Lines, delivery_text, screen_lines
from bench_cli.dash.modals import HELP, Ask, Choice
from bench_cli.dash.model import Board, Row, in_filter, retry_delay, threads
from bench_cli.dash.panes import DashScreen, EventsPane, Holder, Rows
from bench_cli.eventtext import event_line
from bench_wire import messages as m
from bench_wire.asyncclient import AsyncClient
from bench_wire.client import resolve_dir
from bench_wire.errors import Disconnected, WireError
from bench_wire.messages import StructCodec
from bench_wire.untrusted import mask

R = TypeVar("R", bound=m.Response)
Cells = tuple[str | Text, ...]  # a row of the sessions pane

IDLE_REFRESH_S = 5.0  # session/list for the idle column (events carry no idle time)
MAIL_PAGE = 200
TYPE_KEYS = "Enter: type it   Escape: cancel"
SEARCH_KEYS = "Enter: search (the results take the focus)   Escape: cancel"
COMPOSE_KEYS = "Enter: next field, on the body: send   Escape: cancel"
UNREAD_EVERY = 6  # refreshes (of IDLE_REFRESH_S) between re-reads of the unread counts
JOB_SAYS = 8  # the narrowest job cell that still says something: `job->al…`
COUNT_TRIES = 3  # reads of the unread counts while the log moves, before giving up
RECENT_EVENTS = 200  # the events before the dashboard started that its panes show


class Source:
    """The daemon of one BENCH_DIR, as the operator (no session's token): one short
    connection per request, one long one per stream, each answer a typed Struct."""

    def __init__(self, bench_dir: str | None = None):
        self.dir = resolve_dir(bench_dir)

    def _client(self) -> AsyncClient:
        return AsyncClient(self.dir, codec=StructCodec())

    # Both raise WireError: Disconnected when no daemon answers (not started, stopped,
    # or the connection broke), any other code for a refusal.
    async def call(self, req: m.Request[R]) -> R:
        async with self._client() as conn:
            return await conn.call(req)

    async def stream(self, req: m.Request[R]) -> AsyncIterator[R]:
        """Every frame of a stream until its end frame."""
        async with self._client() as conn:
            async for frame in conn.stream(req):
                yield frame

    def attach_argv(self, handle: str) -> list[str]:
        """`bench attach H` for this BENCH_DIR, by the installed console script."""
        bench = os.path.join(os.path.dirname(sys.executable), "bench")
        if not os.path.exists(bench):
            return [sys.executable, "-m", "bench_cli.entry", "attach", "--dir", self.dir, handle]
        return [bench, "attach", "--dir", self.dir, handle]


class Dash(App[None]):
    TITLE = "bench dash"
    # Textual's command palette offers none of bench's commands; the keys are in the help.
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: horizontal; }
    #left { width: 45%; min-width: 34; }
    #right { width: 1fr; }
    #bottom { dock: bottom; height: 2; }
    #sessions-holder, #mail-holder, #events-holder { height: 1fr; }
    #screen-holder { height: 2fr; }
    #sessions { border: round $primary; }
    #mail { border: round $secondary; }
    #screen { border: round $accent; padding: 0 1; overflow: hidden; }
    #events { border: round $secondary; overflow: hidden; }
    #status { height: 1; background: $boost; }
    #screen, #events, #sessions, #mail, #status { text-wrap: nowrap; text-overflow: clip; }
    .dialog { width: 90%; max-width: 90; height: auto; max-height: 90%;
              border: thick $primary; background: $surface; padding: 1 2;
              align: center middle; }
    .dialog Label { width: 100%; }
    .dialog .keys { color: $text-muted; }
    .wide { width: 90%; height: 90%; }
    ModalScreen { align: center middle; }
    """
    BINDINGS = [
        Binding("q", "quit", "quit"),
        # Before Textual's own ^C (a note to press ^Q) and before an input's copy: in a
        # terminal ^C is how one leaves.
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"),
        Binding("a", "attach", "attach"),
        Binding("t", "type", "type"),
        Binding("m", "mail", "mail"),
        Binding("k", "kill", "kill"),
        Binding("slash", "search", "search"),
        Binding("b", "mailbox", "mailbox", show=False),
        Binding("f", "filter", "filter", show=False),
    ]

    def __init__(
        self,
        source: Source,
        *,
        clock: Callable[[], float] = time.monotonic,
        freeze_gc: bool = False,
        driver_class: type[Driver] | None = None,
    ):
        super().__init__(driver_class=driver_class)
        self.freeze_gc = freeze_gc
        self.source = source
        self.clock = clock
        self.board = Board()
        self.connected = False
        self.selected: str | None = None  # the session followed in the screen pane
        self.mailbox_mode = "session"  # or "operator"
        self.search_query: str | None = None
        self.mail_rows: list[dict[str, Any]] = []
        self.event_filter = ("", "")
        self.status_note = ""
        self.isolation_off = ""  # why sessions are not sandboxed ("" when they are)
        self.retry_in = 0.0  # while no daemon answers: the wait before the next attempt
        self.shown_at: dict[int, float] = {}  # seq -> when it was drawn (dash-idle probe)
        self.refreshes = 0
        # When the idle column was last brought up to date: at the snapshot and every
        # IDLE_REFRESH_S, not at every event (docs/dashboard.md, "What it costs").
        self.idle_now = clock()
        self._cells: dict[str, Cells] = {}  # handle -> its row in the sessions pane

    # ------------------------------------------------------------ layout

    def get_default_screen(self) -> Screen[Any]:
        return DashScreen(id="_default")

    def compose(self) -> ComposeResult:
        # The panes are kept as attributes, not looked up: a worker that finishes while
        # the app closes then updates a detached pane instead of failing a lookup.
        # `narrow`: what a narrow pane leaves out first (docs/dashboard.md, "Panes").
        self.sessions_pane = Rows(
            ["handle", "state", "unread", "idle", "last wake", "job", "pid"],
            narrow=(("last wake", 0), ("idle", 0), ("job", JOB_SAYS), ("job", 0), ("unread", 0)),
            id="sessions",
        )
        self.mail_pane = Rows(["sent", "st", "from", "subject"], id="mail")
        self.screen_pane = Lines(id="screen")
        self.events_pane = EventsPane(id="events")
        self.status_line = Static("", id="status")
        # Each pane in its own holder: see Holder.
        with Holder(id="bottom"):
            yield self.status_line
            yield Footer()
        with Holder(id="left"):
            with Holder(id="sessions-holder"):
                yield self.sessions_pane
            with Holder(id="mail-holder"):
                yield self.mail_pane
        with Holder(id="right"):
            with Holder(id="screen-holder"):
                yield self.screen_pane
            with Holder(id="events-holder"):
                yield self.events_pane

    def on_mount(self) -> None:
        self.sessions_pane.focus()
        self.set_status()
        self.follow_events()
        self.set_interval(IDLE_REFRESH_S, self.refresh_sessions)

    # ------------------------------------------------------------ status line

    def set_status(self, note: str | None = None) -> None:
        if note is not None:
            self.status_note = note
        state = (
            ("connected to " + self.source.dir)
            if self.connected
            # What it is doing first: a long directory is what an 80-column line cuts.
            else f"daemon not running: reconnecting, next try in {self.retry_in:g}s "
            f"({self.source.dir})"
        )
        if self.connected and self.isolation_off:
            state += f"  |  SANDBOX OFF: {self.isolation_off}"
        text = state + (f"  |  {self.status_note}" if self.status_note else "")
        # Fixed-size panes: layout=False spares a whole-screen layout pass per update.
        self.status_line.update(Text(text, no_wrap=True, overflow="ellipsis"), layout=False)

    # ------------------------------------------------------------ the event stream

    @work(exclusive=True, group="events")
    async def follow_events(self) -> None:
        first = True
        failures = 0  # attempts in a row that found no daemon
        while True:
            try:
                last_seq = await self.load_snapshot()
                self.connected = True
                if first:
                    # The recent past, for the events pane and the last-wake column; the
                    # snapshot's counts already include what these events did. (An event
                    # between the two is missed or counted twice until the next refresh.)
                    since = max(0, last_seq - RECENT_EVENTS)
                    async for frame in self.source.stream(m.EventsRead(since=since)):
                        self.take_event(frame.event, apply=False)
                    self.draw_sessions()
                    first = False
                    # The app's long-lived objects leave the collector's view (a full
                    # collection cost ~20 ms every half minute). Not in a test process.
                    if self.freeze_gc:
                        gc.collect()
                        gc.freeze()
                since = self.board.last_seq
                failures = 0
                self.set_status("")
                async for frame in self.source.stream(m.EventsRead(since=since, follow=True)):
                    self.take_event(frame.event)
                raise Disconnected("no-daemon", "the event stream ended")
            except WireError as err:
                self.retry_in = retry_delay(failures)
                failures += 1
                if self.connected:
                    self.connected = False
                    self.draw_sessions()
                note = "" if isinstance(err, Disconnected) else err.message
                self.set_status(note)
                await asyncio.sleep(self.retry_in)

    async def load_snapshot(self) -> int:
        """The sessions, their unread counts and the mail pane, from the daemon; the
        event log's newest seq (the events after it are the stream's)."""
        hello = await self.source.call(m.Hello())
        caps = hello.caps
        off = caps.isolation != "on"
        self.isolation_off = (caps.isolation_note or "isolation is off") if off else ""
        a = await self.source.call(m.SessionList())
        unread, at, _ = await self.count_unread({s.handle for s in a.sessions})
        self.idle_now = self.clock()
        self.board.load(msgspec.to_builtins(a.sessions), unread, self.idle_now, seq=at)
        self.draw_sessions()
        # A new connection may be to a new daemon: a selected session it does not know is
        # gone with the old one, and the screen stream ended with the old connection.
        if self.selected is not None and self.selected not in self.board.rows:
            self.selected = None
            self.follow_screen(None)
        if self.selected is None and self.board.rows:
            live = [h for h, r in self.board.rows.items() if r.state == "running"]
            self.select(sorted(live or self.board.rows)[0])
        elif self.selected is not None:
            self.follow_screen(self.selected)
        await self.load_mail()
        return hello.last_seq

    async def count_unread(self, handles: set[str]) -> tuple[dict[str, int], int, bool]:
        """The unread count of each mailbox, the seq they are as of, and whether they are
        exact there: read between two looks at the log's end that agree (not exact if
        the log kept moving COUNT_TRIES times)."""
        unread: dict[str, int] = {}
        at = 0
        for _ in range(COUNT_TRIES):
            at = (await self.source.call(m.Hello())).last_seq
            unread = {}
            for h in handles:
                unread[h] = (await self.source.call(m.MailList(handle=h, limit=1))).total
            if (await self.source.call(m.Hello())).last_seq == at:
                return unread, at, True
        return unread, at, False

    @work(group="recount")
    async def recount(self, handle: str) -> None:
        """A session claimed `handle`: its mailbox's count, read again from the daemon
        (the board may have had no count for it, or one that missed an event)."""
        try:
            unread, at, exact = await self.count_unread({handle})
        except WireError:
            return
        if exact and self.board.set_unread(handle, unread[handle], at):
            self.draw_sessions(only=handle)

    def take_event(self, ev: dict[str, Any], apply: bool = True) -> None:
        changed = self.board.apply(ev, self.clock(), count=apply)
        if in_filter(ev, *self.event_filter):
            self.events_pane.write(event_line(ev))
        if changed:
            self.draw_sessions(only=ev.get("handle") or ev.get("to"))
        if ev["kind"] in ("mail/sent", "mail/read", "agent/woken") and self.search_query is None:
            box = self.mailbox()
            if box in (ev.get("to"), ev.get("handle")):
                self.reload_mail()
        if ev["kind"] == "session/spawned":
            if apply:
                self.recount(ev["handle"])
            if self.selected is None:
                self.select(ev["handle"])
            elif ev["handle"] == self.selected:
                # A new session under the followed name (after a restart, or a respawn):
                # the old one's screen stream has ended, follow the new one.
                self.follow_screen(ev["handle"])
        self.shown_at[ev["seq"]] = time.time()
        if len(self.shown_at) > 1000:
            self.shown_at.pop(next(iter(self.shown_at)))

    async def refresh_sessions(self) -> None:
        """Idle times (no event carries them) and unread counts, every IDLE_REFRESH_S."""
        if not self.connected:
            return
        self.refreshes += 1
        try:
            a = await self.source.call(m.SessionList())
            counted = None
            if self.refreshes % UNREAD_EVERY == 0:
                # Unread counts follow the events; re-read now and then in case one was
                # missed (exact at a seq: Board.set_unread).
                live = {s.handle for s in a.sessions if s.state == "running"}
                counted = await self.count_unread(live)
        except WireError:
            return
        now = self.idle_now = self.clock()
        for s in a.sessions:
            r = self.board.rows.get(s.handle)
            if r is not None and r.session == s.session:
                r.idle_ms, r.idle_at = s.idle_ms, now
                r.reply_to = list(s.reply_to)
        if counted is not None and counted[2]:
            for h, n in counted[0].items():
                self.board.set_unread(h, n, counted[1])
        self.draw_sessions()

    # ------------------------------------------------------------ sessions pane

    def draw_sessions(self, only: str | None = None) -> None:
        """Redraw the sessions pane; with `only`, that row's cells are the only ones
        computed again (an event changes one row)."""
        now, rows = self.idle_now, self.board.rows
        depth = dict(self.board.nested())  # each session under its spawner
        if only is None or set(self._cells) != set(rows):
            self._cells = {h: self._row_cells(r, now, depth.get(h, 0)) for h, r in rows.items()}
        elif only in rows:
            self._cells[only] = self._row_cells(rows[only], now, depth.get(only, 0))
        self.sessions_pane.set_rows([(h, self._cells[h]) for h in depth])

    def _row_cells(self, r: Row, now: float, depth: int) -> Cells:
        unread = Text(str(r.unread), style="bold yellow" if r.unread else "")
        state = r.exit_text() if self.connected else "?"
        name = "  " * depth + "└ " + r.handle if depth else r.handle
        job = " ".join(x for x in (r.job_text(), r.left_text(now)) if x)
        cells = (name, state, unread, r.idle_text(now), r.wake, job, str(r.pid))
        if r.state == "running":
            return cells
        # An exited session is drawn dimmed (and after the live ones: Board.nested).
        return tuple(Text(c.plain if isinstance(c, Text) else c, style="dim") for c in cells)

    def on_rows_highlighted(self, event: Rows.Highlighted) -> None:
        if event.pane.id == "sessions":
            self.select(event.key)

    def on_rows_chosen(self, event: Rows.Chosen) -> None:
        if event.pane.id == "sessions":
            self.select(event.key)
        elif event.pane.id == "mail" and 0 <= int(event.key) < len(self.mail_rows):
            self.show_thread(self.mail_rows[int(event.key)])

    def select(self, handle: str) -> None:
        if handle == self.selected:
            return
        self.selected = handle
        self.follow_screen(handle)
        if self.mailbox_mode == "session" and self.search_query is None:
            self.reload_mail()

    # ------------------------------------------------------------ screen pane

    @work(exclusive=True, group="screen")
    async def follow_screen(self, handle: str | None) -> None:
        """Follow `handle`'s screen (None: no session, an empty pane). When the daemon goes
        away the last screen stays; the next connection follows again (load_snapshot)."""
        pane = self.screen_pane
        if handle is None:
            pane.set_title("screen")
            pane.set_lines([])
            return
        pane.set_title(f"screen: {handle}")
        try:
            async for frame in self.source.stream(m.SessionScreen(handle=handle, follow=True)):
                pane.set_lines(screen_lines(msgspec.to_builtins(frame)))
            # the session ended: its last screen stays
        except Disconnected:
            pass
        except WireError as err:
            pane.set_lines([Text(mask(f"{handle}: {err.message}"))])

    # ------------------------------------------------------------ mail pane

    def mailbox(self) -> str:
        if self.mailbox_mode == "operator" or self.selected is None:
            return "operator"
        return self.selected

    @work(exclusive=True, group="mail")
    async def reload_mail(self) -> None:
        await self.load_mail()

    async def load_mail(self) -> None:
        box = self.mailbox()
        try:
            if self.search_query is not None:
                found = await self.source.call(m.MailSearch(query=self.search_query, limit=100))
                rows = [(0, hit) for hit in msgspec.to_builtins(found.hits)]
                title = f"search: {self.search_query}  ({len(rows)}; Escape: back)"
            else:
                # Listings go oldest first: page to the end and keep the newest MAIL_PAGE.
                page = m.MailList(handle=box, state="all", limit=500)
                a = await self.source.call(page)
                msgs = a.messages
                while a.truncated and a.cursor:
                    a = await self.source.call(msgspec.structs.replace(page, cursor=a.cursor))
                    msgs = (msgs + a.messages)[-MAIL_PAGE:]
                msgs = msgs[-MAIL_PAGE:]
                rows = threads(msgspec.to_builtins(msgs))
                unread = sum(msg["state"] == "unread" for _, msg in rows)
                shown = f"newest {len(msgs)} of " if len(msgs) < a.total else ""
                title = f"mail: {box}  ({unread} unread; {shown}{a.total})"
        except WireError as err:
            self.set_status(err.message)
            return
        t = self.mail_pane
        t.set_title(title)
        self.mail_rows = []
        table = []
        for i, (depth, msg) in enumerate(rows):
            msg = dict(msg, handle=msg.get("handle", box))
            self.mail_rows.append(msg)
            subject = ("  " * depth + ("↳ " if depth else "")) + (msg["subject"] or "-")
            if self.search_query is not None:
                subject = f"{msg['handle']}: {subject} · {' '.join(msg['snippet'].split())}"
            st = Text("new", style="bold yellow") if msg["state"] == "unread" else Text("")
            sent = f"{msg['mail_id'][9:11]}:{msg['mail_id'][11:13]}"  # HH:MM UTC, from the id
            table.append((str(i), (sent, st, mask(msg["from"]), mask(subject))))
        t.set_rows(table, keep_key=False)

    @work(exclusive=True, group="thread")
    async def show_thread(self, msg: dict[str, Any]) -> None:
        try:
            a = await self.source.call(m.MailThread(mail_id=msg["mail_id"]))
        except WireError as err:
            self.set_status(err.message)
            return

        def head(x: m.ThreadMessage, to: str) -> str:
            mark = ">> " if x.mail_id == msg["mail_id"] else ""
            return f"{mark}{x.mail_id}  {x.sender} -> {x.handle}  [{x.state}]"

        parts = output.thread_messages(a, head)
        cut = output.thread_cut(a)
        if cut:
            parts.append(cut)
        try:  # what became of it, as its sender sees it (bench mail status)
            st = await self.source.call(m.MailStatus(mail_id=msg["mail_id"]))
            parts.append("delivery: " + delivery_text(msgspec.to_builtins(st)))
        except WireError:
            pass  # mail from before states were kept, or a daemon without them
        # r retires an unread message; on a read one it closes, as Escape does.
        unread = msg["state"] == "unread"
        hint = ("r: retire (mark read)   " if unread else "") + "Escape: close (nothing is retired)"
        answers = {"escape": None, "q": None, "r": "retire" if unread else None}
        text = mask("\n".join(parts))
        if (
            await self.push_screen_wait(
                Choice("thread", text, hint, answers, wide=True, scroll=True)
            )
            == "retire"
        ):
            await self.act(
                m.MailRead(handle=msg["handle"], mail_id=msg["mail_id"]),
                f"retired {msg['mail_id']}",
            )
            await self.load_mail()

    # ------------------------------------------------------------ actions

    async def act(self, req: m.Request[R], done: str) -> R | None:
        """An operator's action: its answer, or None with why it failed on the status line."""
        try:
            a = await self.source.call(req)
        except WireError as err:
            verb = req.__struct_config__.tag
            self.set_status(f"{verb}: {err.message}")
            return None
        self.set_status(done)
        return a

    def _need_session(self) -> str | None:
        if self.selected is None:
            self.set_status("no session selected")
        return self.selected

    def action_help(self) -> None:
        closes = dict.fromkeys(["escape", "q", "question_mark"])
        self.push_screen(Choice("help", HELP, "", closes, wide=True))

    def action_attach(self) -> None:
        h = self._need_session()
        if h is None:
            return
        with self.suspend():
            # bench attach restores the terminal on every way out; the app redraws after.
            subprocess.run(self.source.attach_argv(h))
        self.set_status(f"detached from {h}")

    @work(group="actions")
    async def action_type(self) -> None:
        h = self._need_session()
        if h is None:
            return
        prompt = f"Type a line into {h} (Enter is pressed after it)"
        line = await self.push_screen_wait(Ask("type", prompt, TYPE_KEYS, ("", "")))
        if line is not None:
            await self.act(m.SessionType(handle=h, text=line[0]), f"typed into {h}")

    @work(group="actions")
    async def action_mail(self) -> None:
        fields = [(self.selected or "", "to (a handle)"), ("", "subject (one line, optional)")]
        draft = await self.push_screen_wait(
            Ask("compose", "Send mail as operator", COMPOSE_KEYS, *fields, ("", "body"))
        )
        if draft and draft[0].strip():
            req = m.MailSend(to=draft[0].strip(), subject=draft[1], body=draft[2])
            a = await self.act(req, "")
            if a is not None:
                self.set_status(f"sent {a.mail_id} to {a.to}")

    @work(group="actions")
    async def action_kill(self) -> None:
        h = self._need_session()
        if h is None:
            return
        answers = {"y": "yes", "n": None, "escape": None}
        hint = "y: yes    n / Escape: no"
        ask = Choice("confirm", f"Kill session {h}?", hint, answers)
        if await self.push_screen_wait(ask) == "yes":
            await self.act(m.SessionKill(handle=h), f"killed {h}")

    @work(group="actions")
    async def action_search(self) -> None:
        prompt = "Search mail: every word must occur (word* is a prefix)"
        q = await self.push_screen_wait(
            Ask("search", prompt, SEARCH_KEYS, (self.search_query or "", ""))
        )
        if q is not None and q[0].strip():
            self.search_query = q[0].strip()
            # Enter now opens a result: the results take the focus, the first one chosen.
            self.mail_pane.cursor = 0
            await self.load_mail()
            self.mail_pane.focus()

    def action_mailbox(self) -> None:
        self.mailbox_mode = "operator" if self.mailbox_mode == "session" else "session"
        self.search_query = None
        self.reload_mail()

    @work(group="actions")
    async def action_filter(self) -> None:
        kind, handle = self.event_filter
        got = await self.push_screen_wait(
            Ask(
                "filter",
                "Filter events by kind prefix (mail/, agent/woken) and/or handle",
                "Enter: filter (empty: every event)   Escape: cancel",
                (" ".join(x for x in (kind, handle) if x), ""),
            )
        )
        if got is None:
            return
        q = got[0]
        kind = handle = ""
        for word in q.split():
            if "/" in word:
                kind = word
            else:
                handle = word
        self.event_filter = (kind, handle)
        log = self.events_pane
        log.lines.clear()
        log.set_title("events" + (f" ({q.strip()})" if q.strip() else ""))
        log.lines.extend(event_line(ev) for ev in self.board.filtered(kind, handle)[-300:])
        log.show()

    def key_escape(self) -> None:
        if self.search_query is not None:
            self.search_query = None
            self.reload_mail()


def run(bench_dir: str | None) -> int:
    from bench_cli.dash.driver import QuietDriver

    Dash(Source(bench_dir), freeze_gc=True, driver_class=QuietDriver).run()
    return 0
