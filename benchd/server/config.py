"""The daemon's configuration as one frozen, typed value.

`benchd.server.options` parses the command line and builds a `DaemonConfig` once, in
`main`; everything past `main` (the daemon's wiring, the connections, the services)
reads this and never the parser's `Namespace`. Every option of the parser has a field
of the same name here (tests/unit/test_config.py holds the two together), so a new
option is either a typed field or a start that fails at once.
"""

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig:
    # Where and who (not in DAEMON_OPTIONS: benchd's own options).
    dir: str | None = None  # --dir; None: $BENCH_DIR, else the per-user default
    node: str = "local"  # --node: this node's name in addresses like bob@NODE
    bridge: str | None = None  # --bridge URL: run and supervise `bench bridge`
    isolation: str = "auto"  # --isolation: auto, required or off
    test_hooks: bool = False  # --test-hooks: the debug/fault verb (tests only)
    # The umask a session's program starts with: the one benchd was started with (benchd
    # itself runs with 077, set in main), so agents create files as they would outside
    # bench. None: leave the daemon's own. Not an option: main reads it.
    session_umask: int | None = None
    # The shared daemon options (bench_wire.config.DAEMON_OPTIONS; defaults there too).
    idle_gate: float = 2.0
    paste_settle: float = 0.2
    wake_burst: int = 6
    wake_refill: float = 60.0
    enter_retries: int = 3
    enter_check: float = 0.5
    retry_base: float = 1.0
    max_connections: int = 256
    session_connections: int = 16
    operator_connections: int = 128
    operator_reserve: int = 32
    tree_connections: int = 64
    flood_interval: float = 60.0
    send_burst: int = 200
    send_rate: float = 20.0
    operator_send_burst: int = 2000
    operator_send_rate: float = 200.0
    mailbox_messages: int = 10000
    mailbox_bytes: int = 268435456
    reply_to_max: int = 16
    idle_timeout: float = 60.0
    max_children: int = 4
    max_depth: int = 3
    spawn_rate: int = 30
    tree_bytes: int = 67108864
    tree_mailboxes: int = 100
    stall_after: float = 600.0
    max_deadline: float = 604800.0
    exited_kept: int = 200
    kept_scrollback: int = 65536
    disk_reserve: int = 67108864
    event_log_bytes: int = 134217728
    session_waits: int = 4
    max_waits: int = 256
    wait_max: float = 3600.0
    agent_reports: int = 20
    approval_wait: float = 600.0
