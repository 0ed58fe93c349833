"""Sessions: agents in ptys owned by the daemon, their identity and lifecycle, agent
presets (docs/reactor.md), and the spawn (`Spawner`).

The spawn's order is the point: the handle is held before the task is mailed (so the
task counts as mail to a live session), the task is in the child's inbox before the
child runs, and every step is undone when a later one fails: a refused task releases
the reservation and closes the job quietly; a process that cannot start settles its
job as failed (or, the daemon stopping, as a refused task); spawn events that cannot be
logged end the child and cancel its job.
"""

import json
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
import trio

from bench_wire import messages as m
from bench_wire.errors import WireError
from benchd.core.authority import Caller
from benchd.core.names import OPERATOR, SYSTEM_WALL, WallClock, check_handle, is_handle
from benchd.core.wakegate import compile_pattern
from benchd.runtime import adapters
from benchd.runtime.committer import EventOp
from benchd.runtime.jobhost import JobHost, JobWatch
from benchd.runtime.limiter import Delegation, Limiter
from benchd.runtime.past import ExitedStore
from benchd.runtime.placement import Placer
from benchd.runtime.reactor import Reactor
from benchd.runtime.roster import Roster, Session
from benchd.runtime.sandbox import Sandbox
from benchd.runtime.system import Log, child_pids, command_name, reap_zombie
from benchd.runtime.terminal import Terminal, check_size

# `bench kill` is closing a terminal: SIGHUP (an interactive shell ignores SIGTERM),
# then SIGTERM, then SIGKILL, each after this many seconds without an exit.
KILL_GRACE = 1.5
EXITED_KEPT = 200
OUTPUT_CHUNK = 48 * 1024


class Sessions:
    def __init__(
        self,
        roster: Roster,
        reactor: Reactor,
        jobs: JobHost,
        record: Callable[[m.Event], Awaitable[bool]],
        log: Log,
        bench_dir: str,
        scrollback_bytes: int,
        helper_pids: set[int],
        daemon_pid: int,
        session_umask: int | None = None,
        wall: WallClock = SYSTEM_WALL,
        *,
        delegation: Delegation,
        watch: JobWatch,
        exited_store: ExitedStore,
        sandbox: Sandbox | None = None,
        approval_wait: float = 600.0,
    ):
        self.wall = wall  # an exited session's end, kept on disk
        self.roster = roster
        self.reactor = reactor
        self.jobs = jobs
        self.record = record  # the committer's
        self.log = log
        self.bench_dir = bench_dir
        self.scrollback_bytes = scrollback_bytes
        self.helper_pids = helper_pids  # the daemon's own children, acting for the operator
        self.daemon_pid = daemon_pid
        self.session_umask = session_umask  # each program's umask (benchd's own is 077)
        self.placer = Placer(roster, helper_pids, daemon_pid)
        self.delegation = delegation
        self.exited_store = exited_store
        self.watch = watch
        self.sandbox = sandbox  # None: isolation off
        self.approval_wait = approval_wait  # an adapter's approval hook waits this long
        # Set by stop_all: no process starts from then on, so a spawn mid-way when the
        # stop began is refused at launch, and every session started is one stop_all ends.
        self.stopping = False

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery the sessions run in, and the orphan reaper."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            task_status.started()
            await self.reap_orphans()

    # ------------------------------------------------------------ identity

    def by_token(self, token: str) -> Session:
        """The live session whose BENCH_TOKEN this is (what a process that left its
        session can still use where the sandbox is off); raises `bad-token`."""
        s = self.roster.by_token.get(token)
        if s is None or not s.live:
            raise WireError(
                "bad-token", "BENCH_TOKEN names no live session (forged, or its session ended)"
            )
        return s

    async def reap_orphans(self) -> None:
        """Collect processes re-parented to the daemon (its subreaper role) once they exit;
        the sessions' own leaders are waited for by their terminals."""
        with trio.open_signal_receiver(signal.SIGCHLD) as sigs:
            async for _ in sigs:
                for pid in child_pids():
                    if (
                        pid not in self.roster.by_leader
                        and pid not in self.helper_pids
                        and reap_zombie(pid)
                    ):
                        self.log.info("orphan reaped", pid=pid)

    def kill_stray_sandboxes(self) -> None:
        """SIGKILL each inner bwrap (its namespace's init, deaf to all else) whose leader
        died before it asked for its parent-death signal (docs/security.md, "The
        sandbox"): the whole namespace goes with it."""
        for pid in child_pids():
            if pid in self.roster.by_leader or pid in self.helper_pids:
                continue
            # One that ended already (a sandbox's init outlives its leader by a moment
            # when all is well) is only collected.
            if command_name(pid) == "bwrap" and not reap_zombie(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                self.log.info("stray sandbox killed", pid=pid)

    # ------------------------------------------------------------ lifecycle

    def _new_id(self) -> str:
        while True:
            sid = "s" + secrets.token_hex(4)
            if sid not in self.roster.by_id and sid not in self.roster.live:
                return sid

    def reserve(self, req: m.Spawn) -> Session:
        """Validate a spawn and hold its handle; `launch` starts the process."""
        if not req.argv:
            raise WireError("bad-request", "spawn needs a command: bench spawn -- CMD ARGS...")
        sid = self._new_id()
        handle = req.name if req.name is not None else sid
        check_handle(handle, "name")
        if handle == OPERATOR:
            raise WireError("handle-reserved", "'operator' is reserved: no session may claim it")
        if handle in self.roster.live:
            raise WireError("handle-taken", f"a live session already holds {handle!r}")
        ready_src, settle = req.ready, None
        if req.agent is not None:
            preset = find_preset(self.bench_dir, req.agent)
            ready_src = req.ready if req.ready is not None else preset.ready
            settle = preset.paste_settle
        # RE2: linear in the screen's text, so no pattern can hold the loop.
        ready = None if ready_src is None else compile_pattern(ready_src)
        cwd = req.cwd or os.getcwd()
        if not os.path.isdir(cwd):
            raise WireError("bad-request", f"--cwd {cwd!r} is not a directory")
        check_size(req.rows, req.cols)
        # The daemon's own BENCH_ view never leaks into a session.
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
        for k, v in req.env.items():
            if not k or "=" in k or "\0" in k or "\0" in v:
                raise WireError("bad-env", f"environment entry {k!r} is not KEY=VALUE")
            env[k] = v
        token = secrets.token_urlsafe(24)
        env.update(
            BENCH_SESSION=sid, BENCH_HANDLE=handle, BENCH_DIR=self.bench_dir, BENCH_TOKEN=token
        )
        if "TERM" not in req.env:
            # What the pty really is: an xterm-like terminal (and what the screen model
            # emulates), whatever terminal the daemon itself was started from.
            env["TERM"] = "xterm-256color"
        # `bench` must be on PATH inside the session, so agents need no flags.
        bindir = os.path.dirname(sys.executable)  # the installation benchd runs from
        if shutil.which("bench", path=bindir):
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        argv = list(req.argv)
        if "/" in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.join(cwd, argv[0])  # relative to the session's cwd, not ours
        if shutil.which(argv[0], path=env.get("PATH")) is None and not os.path.isfile(argv[0]):
            raise WireError("spawn-failed", f"{argv[0]!r} was not found on PATH")
        # The agent's hooks for this session only (its own config files untouched).
        adapted = adapters.adapt(
            req.agent, argv, adapters.hook_command(bindir), self.approval_wait, req.mid_turn
        )
        if adapted.why_not is not None:
            self.log.info("no adapter", handle=handle, why=adapted.why_not)
        s = Session(
            sid,
            handle,
            token,
            argv,
            ready=ready,
            launch_args=(adapted.argv, cwd, env, req.rows, req.cols),
            launch=m.Launch(
                argv=list(req.argv),
                cwd=cwd,
                agent=req.agent,
                ready=req.ready,
                rows=req.rows,
                cols=req.cols,
                sandbox=req.sandbox,
                env_keys=sorted(req.env),
            ),
            size=(req.rows, req.cols),
            paste_settle=settle,
            sandboxed=self.sandbox is not None and req.sandbox,
            adapter=adapted.adapter,
            mid_turn=req.mid_turn and adapted.adapter is not None,
        )
        self.watch.prepare(s, req)  # a bad --deadline is refused before the handle is held
        # The handle is held from now on, so mail sent before the process starts (a job's
        # task) already counts as mail to a live session and queues its wake.
        self.roster.hold(s)
        self.reactor.claimed(s)  # mail that waited for the handle is announced
        return s

    def launch(self, s: Session) -> None:
        """Start the reserved session's process in its pty; `shutting-down` once
        stop_all has begun (the reservation is released)."""
        if self.stopping:
            self.roster.release(s)
            raise WireError("shutting-down", "the daemon is stopping: no session is started")
        assert s.launch_args is not None, "reserve() built it with them"
        argv, cwd, env, rows, cols = s.launch_args
        try:
            if s.sandboxed and self.sandbox is not None:
                argv = self.sandbox.argv(argv, cwd, self._mailbox(s.handle))
            term = Terminal(
                argv,
                cwd,
                env,
                rows,
                cols,
                self.scrollback_bytes,
                umask=self.session_umask,
                # bwrap's --die-with-parent takes effect only once bwrap runs: a daemon
                # that died between the fork and that moment left bwrap running for good.
                die_with=self.daemon_pid if s.sandboxed else None,
                sandboxed=s.sandboxed,
            )
        except Exception as err:  # noqa: BLE001 - any exec failure is the caller's answer
            self.roster.release(s)
            raise WireError("spawn-failed", f"could not start {argv[0]!r}: {err}") from None
        s.started(term)
        self.roster.by_leader[term.pid] = s
        self.nursery.start_soon(self._run, s)

    def _mailbox(self, handle: str) -> str:
        """The session's mailbox directory, made now if it is new: the sandbox shows it
        (read-only) from the start, and a bind needs something to bind."""
        box = os.path.join(self.bench_dir, "mail", handle)
        for d in (box, *(os.path.join(box, sub) for sub in ("inbox", "read", "tmp"))):
            os.makedirs(d, mode=0o700, exist_ok=True)
            if os.path.islink(d) or not os.path.isdir(d):
                raise OSError(f"{d} is not a real directory (a link?)")
        return box

    async def _run(self, s: Session) -> None:
        assert s.term is not None, "launch() started its terminal"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.term.drain)
            nursery.start_soon(self.reactor.run_session, s)
            nursery.start_soon(self.watch.run_session, s)
            code, sig = await s.term.wait_exit()
            if s.sandboxed:
                self.kill_stray_sandboxes()
            if s.sandboxed and code is not None and 128 < code <= 128 + 64:
                # bwrap reports a program killed by signal N as exit 128+N (as a shell
                # does): say it as the signal, as an unsandboxed session would.
                sig, code = code - 128, None
            # Let the last output through (the pty closes once the child's group is gone).
            with trio.move_on_after(0.5):
                while not s.term.eof:
                    await s.term.changed.wait()
            nursery.cancel_scope.cancel()
        await self._settle(s, code, sig)

    async def _settle(self, s: Session, code: int | None, sig: int | None) -> None:
        assert s.term is not None, "only a launched session settles"
        s.exited_with(code, sig)
        self.roster.release(s)
        self.roster.exited.append(s)
        dropped: list[str] = []
        while len(self.roster.exited) > EXITED_KEPT:
            dropped.append(self.roster.exited.popleft().id)
        s.term.close()
        try:
            with trio.CancelScope(shield=True):
                await self.record(
                    m.SessionExited(
                        session=s.id, handle=s.handle, pid=s.term.pid, exit=code, signal=sig
                    )
                )
                if s.job is not None:
                    await self.jobs.settle(s)
        except Exception:  # noqa: BLE001 - logged; the job is settled again at next start
            self.log.exception("settling a session failed", session=s.id)
        finally:
            self.delegation.settled(s)
            with trio.CancelScope(shield=True):
                await self._keep(s, dropped)
            s.exited.set()

    async def _keep(self, s: Session, dropped: list[str]) -> None:
        """Write the exited session to disk (ps -a and tail after a restart); forget on
        disk the ones that fell off the end of the list."""
        store = self.exited_store
        record = s.record(self.wall.wall_ms())
        output = bytes(s.term.scrollback) if s.term is not None else b""

        def work() -> None:
            store.save(s.id, record, output)
            for sid in dropped:
                store.remove(sid)

        try:
            # Their own two threads: a thousand sessions ending at once must not take all
            # of trio's default ones from the journal's checkpoints and the screens.
            await trio.to_thread.run_sync(work, limiter=_KEEP_THREADS)
        except (OSError, ValueError) as err:
            self.log.error("exited session not kept on disk", session=s.id, error=str(err))

    async def prune(self) -> int:
        """Forget the exited sessions, in memory and on disk (their mailboxes and events
        stay); returns how many were forgotten."""
        n = len(self.roster.exited)
        self.roster.exited.clear()
        await trio.to_thread.run_sync(self.exited_store.prune)
        return n

    async def kill(self, s: Session, by: str, cancel: bool, tree: bool) -> list[str]:
        """`bench kill`: end `s` (with `tree`, every live session below it first), marked
        as killed by `by`, its job cancelled with `cancel`; the ids ended, in order."""
        order = []
        if tree:
            # Children first, a level at a time: each child's job settles (and replies to
            # its parent) while the parent is still there to be woken by it.
            below = self.roster.descendants(s.id)
            for depth in sorted({len(c.lineage) for c in below}, reverse=True):
                level = [c for c in below if len(c.lineage) == depth]
                async with trio.open_nursery() as nursery:
                    for c in level:
                        c.mark_killed(by, cancel)
                        nursery.start_soon(end_session, c)
                order += [c.id for c in level]
        s.mark_killed(by, cancel)
        order.append(s.id)
        await end_session(s)
        return order

    async def stop_all(self) -> None:
        """End every session this daemon started, and start no more (`stopping`);
        returns once each has settled."""
        self.stopping = True
        while True:
            # Launched ones only: a reserved one is either refused at launch now, or
            # was launched before `stopping` and is in this list on the next pass.
            left = [s for s in self.roster.live.values() if s.term is not None and s.live]
            if not left:
                self.kill_stray_sandboxes()
                return
            async with trio.open_nursery() as nursery:
                for s in left:
                    s.mark_killed("benchd", cancel=False)  # the daemon is stopping
                    nursery.start_soon(end_session, s)


async def end_session(s: Session, grace: float = KILL_GRACE) -> None:
    """SIGHUP, SIGTERM, then SIGKILL to the process group, `grace` seconds apart
    while it has not exited; returns once settled. A function of the session alone, so
    the job watch (which Sessions is built with) is given it without Sessions."""
    if not s.live or s.term is None:
        return
    for sig in (signal.SIGHUP, signal.SIGTERM):
        s.term.signal_group(sig)
        with trio.move_on_after(grace):
            await s.exited.wait()
            return
    s.term.signal_group(signal.SIGKILL)
    await s.exited.wait()


_KEEP_THREADS = trio.CapacityLimiter(2)  # writes of exited sessions (Sessions._keep)


@dataclass(frozen=True)
class Preset:
    ready: str  # regex searched in the visible screen (lines right-trimmed)
    paste_settle: float | None = None  # seconds between the pasted line and Enter


BUILTIN_PRESETS = {
    # The footer hint; Claude hides it while the input box holds text, so it also
    # means "the input box is empty". Its Ink TUI needs a longer settle before Enter.
    "claude": Preset(ready=r"\? for shortcuts", paste_settle=0.5),
    # Codex shows "? for shortcuts" while still loading; the full footer only once
    # loading is over. Enter within ~120 ms of text becomes a newline: settle 0.25 s.
    "codex": Preset(ready=r"for agents · \? for shortcuts", paste_settle=0.25),
    # pi's context gauge on its status line, e.g. "0.0%/128k".
    "pi": Preset(ready=r"\d+(?:\.\d+)?%/\d+k", paste_settle=0.2),
}


def find_preset(bench_dir: str, name: str) -> Preset:
    """A built-in preset, or one of BENCH_DIR/presets.json (which overrides it)."""
    presets = dict(BUILTIN_PRESETS)
    path = os.path.join(bench_dir, "presets.json")
    try:
        if os.path.exists(path):
            with open(path) as f:
                raw = json.load(f)
            for key, p in raw.items():
                ready, settle = str(p["ready"]), p.get("paste_settle")
                presets[key] = Preset(ready, None if settle is None else float(settle))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise WireError("bad-request", f"{path} is not a valid preset file: {err}") from None
    if name not in presets:
        raise WireError(
            "bad-request", f"no agent preset {name!r}; known: {', '.join(sorted(presets))}"
        )
    return presets[name]


class Spawner:
    def __init__(
        self,
        sessions: Sessions,
        jobs: JobHost,
        delegation: Delegation,
        limiter: Limiter,
        submit: Callable[[EventOp], Awaitable[object]],
    ) -> None:
        self.sessions = sessions
        self.jobs = jobs
        self.delegation = delegation
        self.limiter = limiter
        self.submit = submit  # the committer's: durable before it returns, or raises

    async def spawn(self, caller: Caller, req: m.Spawn) -> m.SpawnOk:
        """Start the session a spawn asks for; its answer, with the request's id unset."""
        jobs, sessions, delegation = self.jobs, self.sessions, self.delegation
        parent = caller.session  # None: the operator's spawn; else a delegation
        if parent is not None:
            req = await delegation.prepare(caller, req)
        if req.job is not None:
            # Each address once: a reply goes to each entry, so one listed twice gets two.
            job = msgspec.structs.replace(req.job, reply_to=list(dict.fromkeys(req.job.reply_to)))
            req = msgspec.structs.replace(req, job=job)
            reply_to = job.reply_to
            self.limiter.recipients(caller.handle, len(reply_to))  # a reply goes to each
            jobs.check_spec(job, caller)
            # The task mail is a send, and so is each reply the job owes: charged now, to
            # the spawner's tree (or the operator), with the child's new mailbox and any
            # reply-to mailbox the replies would make.
            local = [h for h in reply_to if is_handle(h) and h != req.name]
            self.limiter.charge(
                caller,
                1 + len(reply_to),
                len(job.body.encode("utf-8", "surrogatepass")),
                local,
                new_boxes=1,
            )
        s = sessions.reserve(req)
        if parent is not None:
            delegation.started(parent, s)  # no await since prepare: the limits still hold
        mail_id = None
        if req.job is not None:
            try:
                jobs.begin(s, req.job, caller)
                mail_id = await jobs.deliver_task(s, req.job, caller)
            except BaseException:
                self._unreserve(s)
                raise
        try:
            sessions.launch(s)
        except WireError as err:
            if err.code == "shutting-down":
                # Never started (the daemon stops): as a refused task, nothing ran.
                self._unreserve(s)
                raise
            if s.job is not None:
                s.exited_with(127, None)
                await jobs.settle(s)
            delegation.settled(s)
            raise
        assert s.term is not None, "launch() started its terminal"
        events: list[m.Event] = [
            m.SessionSpawned(
                session=s.id, handle=s.handle, pid=s.term.pid, argv=s.argv, job=s.job is not None
            )
        ]
        if parent is not None:
            events.append(delegation.delegated(s))
        try:
            await self.submit(EventOp(*events))
        except WireError:
            s.withdraw()
            await end_session(s, grace=0.5)
            raise
        return m.SpawnOk(session=s.id, handle=s.handle, pid=s.term.pid, mail_id=mail_id)

    def _unreserve(self, s: Session) -> None:
        self.sessions.roster.release(s)
        self.delegation.settled(s)
        if s.job is not None:
            self.jobs.abandon(s)
