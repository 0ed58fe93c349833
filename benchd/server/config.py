"""The daemon's configuration as one frozen, typed value.

`benchd.server.options` parses the command line and builds a `DaemonConfig` once, in
`main`; everything past `main` (the daemon's wiring, the connections, the services)
reads this and never the parser's `Namespace`. The shared daemon options are the fields
of `bench_wire.config.DaemonOptions` (each declared there once, with its default, range
and help); this adds benchd's own, which `bench up` forwards by hand.
"""

import dataclasses

from bench_wire.config import DaemonOptions


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig(DaemonOptions):
    dir: str | None = None  # --dir; None: $BENCH_DIR, else the per-user default
    node: str = "local"  # --node: this node's name in addresses like bob@NODE
    bridge: str | None = None  # --bridge URL: run and supervise `bench bridge`
    isolation: str = "auto"  # --isolation: auto, required or off
    test_hooks: bool = False  # --test-hooks: the debug/fault verb (tests only)
    # The umask a session's program starts with: the one benchd was started with (benchd
    # itself runs with 077, set in main), so agents create files as they would outside
    # bench. None: leave the daemon's own. Not an option: main reads it.
    session_umask: int | None = None
