"""The wake reactor: it answers mail/sent by typing one line into the recipient's pty
(docs/reactor.md, and docs/agents.md, "Doors"). A wake is committed (its message retired
and `agent/woken` logged in one op) before its line is typed, so the files, the delivery
state and the log agree whatever ends the session meanwhile.
"""

import dataclasses
from collections.abc import Awaitable, Callable

import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core import agentstate, wakegate
from benchd.core.limits import TokenBucket
from benchd.core.names import SYSTEM_WALL, WallClock
from benchd.core.wakegate import digest_line, for_shell, shell_of, wake_line
from benchd.runtime.mailroom import Mailroom
from benchd.runtime.roster import Session, Wake
from benchd.runtime.system import Log
from benchd.runtime.terminal import Terminal

READY_LINES = 3  # how much of the end of the screen a ready pattern is matched against
QUIET_S = 0.03  # output-free time after a paste before the screen counts as settled
QUIET_LIMIT_S = 1.0  # an agent that never stops printing is not waited on longer
AGENT_SETTLE_S = 0.3  # the idle gate for an agent whose own report says its turn ended


@dataclasses.dataclass(eq=False)
class Courier:
    """Per recipient handle: its bucket and the capped mail not yet announced."""

    bucket: TokenBucket
    capped: dict[str, str] = dataclasses.field(default_factory=dict)  # id -> path, in order
    # Mail that waited for a session to claim the handle, found with no token to
    # announce it: the digest counts every unread message of the handle.
    backlog: bool = False
    timer_armed: bool = False


class Reactor:
    def __init__(
        self,
        find_session: Callable[[str], "Session | None"],
        mailroom: Mailroom,
        record: Callable[[m.Event], Awaitable[bool]],
        settings: m.ReactorSettings,
        log: Log,
        wall: WallClock = SYSTEM_WALL,
    ) -> None:
        self.find_session = find_session  # a live session by handle, or None
        self.wall = wall  # only dates a wake's `until` (the buckets and gate: trio's clock)
        self.mailroom = mailroom
        self.record = record  # the committer's
        self.log = log
        self.settings = settings
        self.gate = settings.idle_gate
        self.couriers: dict[str, Courier] = {}

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def courier(self, handle: str) -> Courier:
        c = self.couriers.get(handle)
        if c is None:
            st = self.settings
            c = self.couriers[handle] = Courier(
                TokenBucket(st.wake_burst, st.wake_refill, trio.current_time())
            )
        return c

    def on_event(self, event: m.Event) -> None:
        if not isinstance(event, m.MailSent) or event.recovered:
            return
        session = self.find_session(event.to)
        if session is None:
            return
        c = self.courier(session.handle)
        now = trio.current_time()
        if c.bucket.take(now):
            session.queue_wake(Wake(event.mail_id, event.sender))
            return
        c.capped[event.mail_id] = event.path
        due = c.bucket.next_token_at(now)
        self.nursery.start_soon(
            self.record,
            m.WakeCapped(
                session=session.id,
                handle=session.handle,
                mail_id=event.mail_id,
                path=event.path,
                until=self.wall.wall_ms() + int(max(0.0, due - now) * 1000),
            ),
        )
        self._arm(session.handle, c)

    def _arm(self, handle: str, c: Courier) -> None:
        if not c.timer_armed:
            c.timer_armed = True
            self.nursery.start_soon(self._digest_when_refilled, handle, c)

    def _unannounced(self, handle: str, c: Courier, session: "Session") -> int:
        """How many messages the digest would announce now: the capped ones still
        unread, or with a backlog every unread one not already queued for its own wake."""
        if c.backlog:
            queued = sum(1 for w in session.wakes if w.mail_id is not None)
            return max(0, self.mailroom.unread_count(handle) - queued)
        return sum(1 for i in c.capped if self.mailroom.is_unread(handle, i))

    async def _digest_when_refilled(self, handle: str, c: Courier) -> None:
        try:
            while c.capped or c.backlog:
                now = trio.current_time()
                await trio.sleep(max(0.0, c.bucket.next_token_at(now) - now))
                session = self.find_session(handle)
                n = 0 if session is None else self._unannounced(handle, c, session)
                if session is None or n == 0:
                    # No one to tell (the next session to claim the handle is told by
                    # `claimed`), or nothing left unread.
                    c.capped.clear()
                    c.backlog = False
                    return
                if c.bucket.take(trio.current_time()):
                    c.capped.clear()
                    c.backlog = False
                    session.queue_wake(Wake(None, None, digest=n))
                    return
        finally:
            c.timer_armed = False

    def claimed(self, session: "Session") -> None:
        """`session` now holds its handle: mail that waited for it unread is announced.
        Called with no await since the handle was taken, so every message is either
        counted here or gets its own wake from on_event: none twice, none missed."""
        handle = session.handle
        n = self.mailroom.unread_count(handle)
        if n == 0:
            return
        c = self.courier(handle)
        now = trio.current_time()
        if not c.bucket.take(now):
            # Capped: the digest announces them when a token comes back.
            c.backlog = True
            self._arm(handle, c)
            return
        first = self.mailroom.oldest_unread(handle) if n == 1 else None
        session.queue_wake(Wake(first.mail_id, first.sender) if first else Wake(None, None, n))

    async def run_session(self, session: "Session") -> None:
        try:
            await self._deliver_wakes(session)
        except OSError as err:
            # The pty went away under a write (the child is exiting): the session's
            # exit settles it; its remaining wakes are dropped with it.
            self.log.info("waker stopped", session=session.id, error=str(err))
        except Exception:  # noqa: BLE001 - a reactor bug must not take the daemon down
            self.log.exception("waker failed", session=session.id)

    async def _deliver_wakes(self, session: "Session") -> None:
        while True:
            while not session.wakes:
                await session.poked()
            await self._until_ready(session, session.wakes[0])
            await self._lock_when_ready(session)
            try:
                if not session.wakes:
                    continue  # the agent's own door took it meanwhile (hand_over)
                wake = session.wakes.popleft()
                woken = await self._commit(session, wake)
                if woken is None:
                    continue
                line = self._line(woken)
                await self._type_line(session, for_shell(line, shell_of(session.argv)), woken)
            finally:
                session.write_lock.release()

    @staticmethod
    def _line(woken: m.AgentWoken) -> str:
        if woken.path is None:
            return digest_line(woken.digest)
        assert woken.sender is not None, "a mail's wake names its sender"
        return wake_line(woken.sender, woken.path)

    async def _commit(
        self, session: "Session", wake: Wake, door: str | None = None
    ) -> m.AgentWoken | None:
        """Commit the wake just before its line is typed (the write lock held) or handed
        over. None: nothing to announce (read meanwhile, or the disk refused)."""
        if wake.digest:
            digest = m.AgentWoken(
                session=session.id,
                handle=session.handle,
                mail_id=None,
                path=None,
                digest=wake.digest,
                door=door,
            )
            await self.record(digest)
            return digest
        assert wake.mail_id is not None and wake.sender is not None, "a mail's wake"
        try:
            woken = await self.mailroom.retire_for_wake(
                session.id, session.handle, wake.mail_id, wake.sender, door
            )
        except WireError as err:
            # The disk refused the move: this wake is dropped (the mail stays unread,
            # listed as usual); the session keeps getting wakes.
            self.log.warning(
                "wake dropped", session=session.id, mail_id=wake.mail_id, error=err.message
            )
            return None
        if woken is None:
            # Read meanwhile: nothing to announce, and the token bought nothing.
            self.courier(session.handle).bucket.give_back(trio.current_time())
        return woken

    async def _lock_when_ready(self, session: "Session") -> None:
        """Take the session's write lock with the gate open (and, for an agent that
        reports for itself, its report saying idle). Someone may have typed (or the agent
        printed) while we waited for the lock: the gate is judged again with it held."""
        while True:
            await session.write_lock.acquire()
            try:
                ready = agentstate.may_type(session.agent, self.wall.wall_ms()) and isinstance(
                    await self._readiness(session), wakegate.Ready
                )
            except BaseException:
                session.write_lock.release()  # e.g. cancelled while the screen renders
                raise
            if ready:
                return
            session.write_lock.release()
            await self._until_ready(session)

    async def hand_over(self, session: "Session", door: str = "stop-hook") -> str | None:
        """The next queued wake's line, handed to an agent whose turn just ended (its
        Stop hook asks) instead of typed, then `agent/active`. None: no wake queued."""
        while session.wakes:
            wake = session.wakes.popleft()
            woken = await self._commit(session, wake, door=door)
            if woken is None:
                continue
            await self.record(
                m.AgentActive(session=session.id, handle=session.handle, mail_id=woken.mail_id)
            )
            return self._line(woken)
        return None

    async def _readiness(self, session: "Session") -> wakegate.Readiness:
        """The gate's answer for this session now, looking at the screen only if asked."""
        a = wakegate.Activity(
            now=trio.current_time(),
            last_output=_term(session).last_output,
            last_input=session.last_input,
        )
        gate = self.gate
        if session.agent is not None and session.agent.state == "idle" and not session.agent.fresh:
            # The agent said itself that its turn ended at its prompt: the quiet time
            # only lets the prompt be drawn, it no longer has to stand for its word.
            gate = min(gate, AGENT_SETTLE_S)
        action = wakegate.readiness(gate, a)
        if isinstance(action, wakegate.LookAtScreen):
            a = dataclasses.replace(a, shows_ready=await self._shows_ready(session))
            action = wakegate.readiness(gate, a)
        return action

    async def _shows_ready(self, session: "Session") -> bool:
        """The ready pattern, if any, matches the screen's last READY_LINES lines."""
        if session.ready is None:
            return True
        lines = (await _term(session).screen_text()).split("\n")[-READY_LINES:]
        return session.ready.search("\n".join(lines)) is not None

    async def _until_ready(self, session: "Session", wake: Wake | None = None) -> None:
        while True:
            if not agentstate.may_type(session.agent, self.wall.wall_ms()):
                # An agent that reports for itself is typed to only when it says it is
                # idle at its prompt: blocked and limited agents' wakes wait (parked).
                if wake is not None:
                    await self._parked(session, wake)
                    wake = None  # said once per wake
                await self._agent_changes(session)
                continue
            # Taken before the screen is read: output that arrives while it is rendered
            # (a prompt drawn just then) sets this event, so the gate looks again.
            changed = _term(session).changed
            match await self._readiness(session):
                case wakegate.Ready():
                    return
                case wakegate.WaitForOutput():
                    await changed.wait()
                case wakegate.WaitUntil(at=at):
                    if wake is not None and self._typing(session):
                        await self._deferred(session, wake, "operator-typing")
                        wake = None  # said once per wake
                    await trio.sleep(max(0.0, at - trio.current_time()))
                case wakegate.WaitForScreen(timeout=timeout):
                    with trio.move_on_after(timeout):
                        await changed.wait()

    async def _agent_changes(self, session: "Session") -> None:
        changed = session.agent_changed
        a = session.agent
        if a is not None and a.state == "limited" and a.until is not None:
            with trio.move_on_after(max(0.0, (a.until - self.wall.wall_ms()) / 1000)):
                await changed.wait()
        else:
            await changed.wait()

    async def _parked(self, session: "Session", wake: Wake) -> None:
        a = session.agent
        if a is None or a.state not in ("blocked", "limited"):
            return  # working: the Stop hook will hand it over, nothing to say
        if a.state == "limited":
            await self._deferred(session, wake, "parked", a.until)
        else:
            await self._deferred(session, wake, "blocked")

    def _typing(self, session: "Session") -> bool:
        last = session.last_input
        return bool(last) and trio.current_time() - last < self.gate

    async def _deferred(
        self, session: "Session", wake: Wake, reason: str, until: int | None = None
    ) -> None:
        await self.record(
            m.WakeDeferred(
                session=session.id,
                handle=session.handle,
                mail_id=wake.mail_id,
                reason=reason,
                until=until,
            )
        )

    async def _type_line(self, session: "Session", line: str, woken: m.AgentWoken) -> None:
        """Paste, settle, Enter; Enter again while the screen stays (the write lock is
        held, the wake already committed)."""
        term = _term(session)
        data = line.encode("utf-8")
        if term.bracketed_paste:
            data = b"\x1b[200~" + data + b"\x1b[201~"
        await term.write(data)
        await trio.sleep(
            session.paste_settle if session.paste_settle is not None else self.settings.paste_settle
        )
        # The Enter check compares against this screen: take it once the paste's echo
        # has stopped arriving, or a late echo would pass for the Enter's effect.
        before = await self._quiet_screen(term)
        await term.write(b"\r")
        check = wakegate.EnterCheck(self.settings.enter_retries, self.settings.enter_check)
        action: wakegate.Watch | wakegate.Done | wakegate.GiveUp = check.first()
        while isinstance(action, wakegate.Watch):
            changed = term.eof or await self._screen_changes(term, before, action.wait)
            step = check.seen(changed=changed)
            if isinstance(step, wakegate.Done):
                if not term.eof:
                    # The screen moved after the wake: evidence (not proof) that the
                    # agent took the line up; the sender's `active` state.
                    await self.record(
                        m.AgentActive(
                            session=session.id, handle=session.handle, mail_id=woken.mail_id
                        )
                    )
                return
            await term.write(b"\r")
            await self.record(
                m.EnterRetried(
                    session=session.id,
                    handle=session.handle,
                    mail_id=woken.mail_id,
                    attempt=step.attempt,
                )
            )
            action = check.retried()

    async def _quiet_screen(
        self, term: Terminal, quiet: float = QUIET_S, limit: float = QUIET_LIMIT_S
    ) -> str:
        """The screen once no output has arrived for `quiet` seconds (at most `limit`).
        Usually at once: the echo of a paste arrives well within the paste settle."""
        with trio.move_on_after(limit):
            while not term.eof:
                last = term.last_output
                idle = quiet if last is None else trio.current_time() - last
                if idle >= quiet:
                    break
                changed = term.changed
                with trio.move_on_after(quiet - idle):
                    await changed.wait()
        return await term.screen_text()

    @staticmethod
    async def _screen_changes(term: Terminal, before: str, wait: float) -> bool:
        with trio.move_on_after(wait):
            while True:
                changed = term.changed
                if await term.screen_text() != before:
                    return True
                await changed.wait()
        return await term.screen_text() != before


def _term(session: "Session") -> Terminal:
    """The terminal of a session the reactor serves (its waker starts after launch)."""
    assert session.term is not None, "a waker runs only for a launched session"
    return session.term
