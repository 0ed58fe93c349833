"""The daemon's services, built (`build(config, opened) -> Wired`), and what a handler is
given of them (`Services`). Pure wiring, no I/O: what needs the disk or the process the
start-up opens first and hands in as `Opened` (ARCHITECTURE.md, "Wiring";
tests/unit/test_wiring.py checks it). The one link made after construction is the hub's
listeners, in the order they hear an event.
"""

import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import trio

from bench_wire import messages as m
from bench_wire.messages import DEFAULT_FRAME_BYTES
from benchd.core.authority import OPERATOR_CONNECTIONS, Admission, Caller
from benchd.core.limits import Floods
from benchd.core.names import IdClock, Log, WallClock
from benchd.core.trees import DelegationLimits
from benchd.runtime.agenthost import AgentHost
from benchd.runtime.committer import Committer, JournalStore, Op
from benchd.runtime.hub import Hub
from benchd.runtime.jobhost import JobHost, JobWatch
from benchd.runtime.limiter import Delegation, Limiter
from benchd.runtime.mailroom import (
    BODY_BYTES,
    LIST_DEFAULT,
    LIST_MAX,
    SUBJECT_CHARS,
    Mailboxes,
    Mailroom,
)
from benchd.runtime.mailservice import MailService
from benchd.runtime.nodes import Directory
from benchd.runtime.outbound import Outbound
from benchd.runtime.past import ExitedStore, PastSession
from benchd.runtime.reactor import Reactor
from benchd.runtime.roster import Roster
from benchd.runtime.sandbox import Sandbox
from benchd.runtime.sessions import EXITED_KEPT, Sessions, Spawner, end_session
from benchd.runtime.tracking import MailStates, Receipts
from benchd.runtime.waits import MAX_WAITS, Waits
from benchd.server.connection import Connection
from benchd.server.options import DaemonConfig, reactor_settings, send_limits
from benchd.store import statedir
from benchd.store.eventlog import EventLog
from benchd.store.fileio import free_bytes
from benchd.store.index import Index
from benchd.store.journal import Journal
from benchd.store.outbox import JobFiles
from benchd.store.queries import THREAD_MAX, MailQueries
from benchd.store.spares import Spares


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """What `hello` tells of the daemon itself (fixed for its lifetime)."""

    pid: int
    bench_dir: str
    caps: m.Caps
    reactor: m.ReactorSettings
    test_hooks: bool  # the debug/fault verb is enabled (tests only)


@dataclass(frozen=True, slots=True)
class BridgeDesk:
    """What only the bridge's handlers use (`handlers/bridge.py`), besides the services."""

    # The committer's queue: the op goes into the next batch; `await op.wait()` for its
    # result. A bridge verb queues all of its ops before it waits, so they commit as one.
    enqueue: Callable[[Op[object]], None]
    # The committer's record: events no client waits on; never raises, says if written.
    record: Callable[..., Awaitable[bool]]  # record(*events)
    log: Log  # what the bridge reported: forgotten, skipped, stopped


@dataclass(frozen=True, slots=True)
class Services:
    info: DaemonInfo
    request_stop: Callable[[], None]  # a clean stop, as SIGTERM asks for it
    mail: MailService  # sends to any address, replies, stored messages read back
    mailroom: Mailroom  # list and read (which retires) of a local mailbox
    index: Index  # the index's public reads (a row, counts, health)
    queries: MailQueries  # search, threads and the links between messages
    roster: Roster  # who is running, live and exited
    sessions: Sessions  # ending sessions, the exited ones kept on disk
    spawner: Spawner  # session/spawn, with its rollback
    jobs: JobHost  # job/report
    agents: AgentHost  # agent/report (bench hook), agent/answer (bench approve, deny)
    outbound: Outbound  # mail for other nodes, this node's name, the bridge's state
    hub: Hub  # live events for followers
    eventlog: EventLog  # the event log's history
    limiter: Limiter  # the send limits (rate, mailbox caps, reply-to count)
    disk_health: Callable[[], m.DiskHealth]  # the state dir's disk: full, free, reserve
    damage: statedir.Damage  # journal damage not yet acknowledged (`found`), and its `ack`
    bridge: BridgeDesk  # the bridge's handlers only (see the module's docstring)
    states: MailStates  # the delivery states of sent mail
    waits: Waits  # the open waits (mail wait, job wait) and who waits on whom
    receipts: Receipts  # receipts for other nodes' mail, for the bridge to send back


R = TypeVar("R", bound=m.Request)
# Every handler: the services, the connection to answer on, who is asking, and the
# decoded request (authority.check has already allowed it). It sends its answer(s) on
# the connection or raises a WireError.
Handler: TypeAlias = Callable[[Services, Connection, Caller, R], Awaitable[None]]
Handlers: TypeAlias = dict[type[m.Request], Handler[Any]]


SCROLLBACK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Opened:
    """What the start-up opened, read or learned before the services are built."""

    bench_dir: str  # the state directory, taken and locked
    pid: int
    subreaper: bool  # orphans of sessions are re-parented to the daemon
    log: Log  # benchd.log
    wall: WallClock  # the one wall clock (times written to disk or shown)
    sandbox: Sandbox | None  # each session's sandbox; None: isolation off or unavailable
    isolation_note: str  # why there is none
    eventlog: EventLog
    journal: Journal
    index: Index
    jobs: JobFiles  # the job host's records
    directory: Directory  # the nodes seen (nodes.json)
    exited_store: ExitedStore  # exited sessions kept on disk
    past: tuple[PastSession, ...]  # the ones it kept, read back, oldest first
    damage: statedir.Damage  # journal damage not yet acknowledged


@dataclass(frozen=True, slots=True)
class Wired:
    """Every service, built once: `services` (what handlers see of them), and those
    only the daemon itself runs or holds."""

    admission: Admission
    stop: trio.Event  # set to stop cleanly (SIGTERM, daemon/stop)
    helper_pids: set[int]  # the daemon's own children acting for the operator
    committer: Committer
    ids: IdClock  # the mailroom's ids, resumed by the start-up after recovery
    reactor: Reactor
    services: Services


def caps(config: DaemonConfig, sandboxed: bool, isolation_note: str) -> m.Caps:
    """What `hello` says of the daemon's limits."""
    return m.Caps(
        frame_bytes=DEFAULT_FRAME_BYTES,
        body_bytes=BODY_BYTES,
        subject_chars=SUBJECT_CHARS,
        list_cap=LIST_DEFAULT,
        list_max=LIST_MAX,
        connections=config.max_connections,
        tree_connections=config.tree_connections,
        scrollback_bytes=SCROLLBACK_BYTES,
        max_children=config.max_children,
        max_depth=config.max_depth,
        spawn_rate=config.spawn_rate,
        exited_kept=EXITED_KEPT,
        kept_scrollback_bytes=config.kept_scrollback,
        **dataclasses.asdict(send_limits(config)),
        thread_max=THREAD_MAX,
        isolation="on" if sandboxed else "off",
        isolation_note=isolation_note,
    )


def build(config: DaemonConfig, opened: Opened) -> Wired:
    """Build every service from the config and what the start-up opened; no I/O."""
    o = opened
    log, index, wall = o.log, o.index, o.wall
    limits = send_limits(config)
    the_caps = caps(config, o.sandbox is not None, o.isolation_note)
    admission = Admission(
        config.max_connections,
        config.session_connections,
        OPERATOR_CONNECTIONS,
        config.operator_reserve,
        config.tree_connections,
    )
    # Every refusal a caller can loop on is written down as one line per flood and
    # source: one Floods for the limiter, the waits and delegation (benchd.core.limits).
    floods = Floods(config.flood_interval)
    stop = trio.Event()
    helper_pids: set[int] = set()
    hub = Hub(log)
    committer = Committer(
        JournalStore(o.eventlog, o.journal, wall),
        index,
        hub.publish,
        on_lost=lambda events, err: log.error(
            "events not logged", kinds=[type(e).__name__ for e in events], error=err.message
        ),
    )
    roster = Roster()
    roster.exited.extend(o.past)  # `bench ps` shows the sessions earlier runs kept
    mail_root = os.path.join(o.bench_dir, "mail")
    mailboxes = Mailboxes(mail_root, lambda handle: handle in roster.live)
    # A tree pays for the mailboxes its mail makes; the unread caps are checked where a
    # batch commits (the mailroom's admit).
    limiter = Limiter(limits, index, committer, log, mailbox_exists=mailboxes.exists, floods=floods)
    ids = IdClock()
    # Started with the committer; none with --spare-files 0.
    spare_dir = os.path.join(o.bench_dir, "spare")
    spares = Spares(spare_dir, config.spare_files) if config.spare_files else None
    mailroom = Mailroom(
        mail_root, index, committer, mailboxes, ids, admit=limiter.admit, wall=wall, spares=spares
    )
    outbound = Outbound(config.node, index, mailroom, committer, o.directory, wall)
    jobs = JobHost(
        o.jobs,
        mailroom,
        committer,
        index,
        the_caps.body_bytes,
        config.retry_base,
        log,
        wall=wall,
        outbound=outbound,  # job replies to handle@node go out through it
    )
    reactor = Reactor(
        roster.live.get,
        mailroom,
        committer.record,
        reactor_settings(config),
        log,
        wall=wall,
    )
    mail_states = MailStates(index, config.node)
    receipts = Receipts(index, config.node, log, wall)  # other nodes' mail, for the bridge
    waits = Waits(config.session_waits, MAX_WAITS, committer.enqueue, floods)
    # The reactor first; then the states of a batch's events join the index's pending
    # changes with the batch's last_seq (benchd.runtime.tracking).
    for listener in (reactor.on_event, mail_states.on_event, receipts.on_event, waits.on_event):
        hub.listeners.append(listener)
    delegation = Delegation(
        roster,
        mailroom,
        committer.record,
        log,
        DelegationLimits(config.max_children, config.max_depth, config.spawn_rate),
        floods,
    )
    watch = JobWatch(
        committer.record,
        mailroom,
        limiter,
        o.jobs,
        end_session,
        log,
        config.stall_after,
        config.max_deadline,
        wall=wall,
        outbound=outbound,  # stall mail to handle@node goes out through it
    )
    sessions = Sessions(
        roster,
        reactor,
        jobs,
        committer.record,
        log,
        o.bench_dir,
        SCROLLBACK_BYTES,
        helper_pids,
        o.pid,
        session_umask=config.session_umask,
        delegation=delegation,
        watch=watch,
        exited_store=o.exited_store,
        sandbox=o.sandbox,
        wall=wall,
        approval_wait=config.approval_wait,
    )
    agents = AgentHost(
        reactor,
        watch,
        committer.record,
        log,
        config.approval_wait,
        config.agent_reports,
        wall=wall,
        floods=floods,
    )
    queries = MailQueries(index)
    services = Services(
        info=DaemonInfo(
            o.pid,
            o.bench_dir,
            the_caps,
            reactor_settings(config),
            config.test_hooks,
        ),
        request_stop=stop.set,
        mail=MailService(mailroom, outbound, index, queries),
        mailroom=mailroom,
        index=index,
        queries=queries,
        roster=roster,
        sessions=sessions,
        spawner=Spawner(sessions, jobs, delegation, limiter, committer.submit),
        jobs=jobs,
        agents=agents,
        outbound=outbound,
        hub=hub,
        eventlog=o.eventlog,
        limiter=limiter,
        disk_health=lambda: m.DiskHealth(
            free=free_bytes(o.bench_dir), full=committer.disk_full, reserve=statedir.DISK_RESERVE
        ),
        damage=o.damage,
        bridge=BridgeDesk(committer.enqueue, committer.record, log),
        states=mail_states,
        waits=waits,
        receipts=receipts,
    )
    return Wired(admission, stop, helper_pids, committer, ids, reactor, services)
