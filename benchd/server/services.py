"""What a handler is given: the daemon's services as one typed, frozen record, and the
one signature every handler has.

A handler sees the services it may use and nothing else of the daemon: no committer,
no raw index connection, no options namespace. `benchd/server/wiring.py` builds the
record once, after the services themselves.

The bridge's verbs build their own durable work (the marks of forwarded mail, the
deliveries of inbound mail, in one batch each) and log what the bridge reports: they
alone get the committer's queue and the daemon's log, narrowed to `BridgeDesk`.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import structlog

from bench_wire import messages as m
from benchd.core.authority import Caller
from benchd.runtime.agenthost import AgentHost
from benchd.runtime.committer import Op
from benchd.runtime.hub import Hub
from benchd.runtime.jobhost import JobHost
from benchd.runtime.limiter import Limiter
from benchd.runtime.mailroom import Mailroom
from benchd.runtime.mailservice import MailService
from benchd.runtime.outbound import Outbound
from benchd.runtime.roster import Roster
from benchd.runtime.sessions import Sessions
from benchd.runtime.spawning import Spawner
from benchd.runtime.tracking import MailStates, Receipts
from benchd.runtime.waits import Waits
from benchd.server.connection import Connection
from benchd.store.eventlog import EventLog
from benchd.store.index import Index
from benchd.store.queries import MailQueries


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
    log: structlog.stdlib.BoundLogger  # what the bridge reported: forgotten, skipped, stopped


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
    damage: Callable[[], list[m.JournalDamaged]]  # journal damage not yet acknowledged
    ack_damage: Callable[[], int]  # acknowledge it all (io-error if it cannot); how many
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
