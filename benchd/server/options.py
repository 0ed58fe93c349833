"""benchd's command line and the configuration built from it: the shared options come
from `bench_wire.config.OPTIONS`, benchd's own are added here (`bench up` forwards them
by hand). `main` builds the one frozen `DaemonConfig` from the parsed options, once:
nothing past `main` reads the parser's `Namespace`.
"""

import argparse
import dataclasses
import os

from bench_wire import messages as m
from bench_wire.addresses import check_node
from bench_wire.config import OPTIONS, DaemonOptions, option_problem
from bench_wire.errors import WireError
from benchd import __version__
from benchd.core.limits import Limits
from benchd.core.wakegate import ENTER_RETRIES
from benchd.runtime.nodes import default_node
from benchd.runtime.sandbox import MODES as ISOLATION_MODES


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchd", description="the bench daemon")
    p.add_argument("--dir", help="BENCH_DIR (else $BENCH_DIR, else the per-user default)")
    for o in OPTIONS:
        raw = os.environ.get(o.env)
        value = o.default
        if raw is not None:
            try:
                value = o.type(raw)
            except ValueError:
                p.error(f"{o.env}={raw!r} is not a valid {o.type.__name__}")
        p.add_argument(
            o.flag,
            type=o.type,
            default=value,
            dest=o.dest,
            help=f"{o.help} (env {o.env}, default {o.default})",
        )
    p.add_argument(
        "--node",
        default=os.environ.get("BENCH_NODE") or default_node(),
        help="this node's name in addresses like bob@NODE (env BENCH_NODE, default: the hostname)",
    )
    p.add_argument(
        "--bridge",
        metavar="URL",
        default=None,
        help="run and supervise `bench bridge --nats URL` (output in bridge.out)",
    )
    p.add_argument(
        "--isolation",
        choices=ISOLATION_MODES,
        default=os.environ.get("BENCH_ISOLATION") or "auto",
        help="run each session in a sandbox of its own (bwrap): auto (where the kernel "
        "allows it), required (refuse to start without), off (env BENCH_ISOLATION, "
        "default auto)",
    )
    p.add_argument(
        "--test-hooks", action="store_true", help="enable the debug/fault verb (tests only)"
    )
    p.add_argument("--version", action="version", version=f"benchd {__version__}")
    return p


def options_problem(config: DaemonConfig) -> str | None:
    """What is wrong with the options as parsed, or None."""
    for o in OPTIONS:
        problem = option_problem(o.flag, getattr(config, o.dest))
        if problem:
            return problem
    if config.isolation not in ISOLATION_MODES:
        return f"--isolation {config.isolation!r} is not one of {', '.join(ISOLATION_MODES)}"
    try:
        check_node(config.node, "--node")
    except WireError as err:
        return err.message
    return None


def send_limits(config: DaemonConfig) -> Limits:
    """The send limits as the limiter applies them (hello's caps report the same): each
    the option of its name."""
    return Limits(**{f.name: getattr(config, f.name) for f in dataclasses.fields(Limits)})


def reactor_settings(config: DaemonConfig) -> m.ReactorSettings:
    """The wake reactor's settings as hello reports them: each the option of its name,
    but enter_retries (no option)."""
    names = [f for f in m.ReactorSettings.__struct_fields__ if f != "enter_retries"]
    return m.ReactorSettings(enter_retries=ENTER_RETRIES, **{f: getattr(config, f) for f in names})
