"""Nodes (docs/nodes.md): naming, the directory of nodes the bridge has seen (kept in
BENCH_DIR/nodes.json, so a daemon restarted without its bridge still queues for them),
and `supervise`, which runs `bench bridge` as a child (so asyncio and nats-py never
enter the daemon).
"""

import json
import os
import re
import socket
import subprocess
import sys

import msgspec
import trio

from bench_wire.addresses import split_address
from bench_wire.errors import EXIT_USAGE, WireError
from bench_wire.messages import NodeInfo
from benchd.core.names import SYSTEM_WALL, WallClock, is_handle
from benchd.runtime.system import Log
from benchd.store.fileio import replace_file

# Messages queued for other nodes live in this mailbox; `@` keeps it out of handle space.
OUTBOUND = "@outbound"
FORGET_AFTER = 7 * 86400.0  # seconds: a node not seen for this long is forgotten


def default_node() -> str:
    """The hostname made into a valid node name (lower case, other characters -> `-`)."""
    name = re.sub(r"[^a-z0-9._-]", "-", socket.gethostname().split(".")[0].lower())
    name = name.strip("-._")[:64]
    return name if is_handle(name) else "node"


def remote_sender(sender: str, origin: str, own: str) -> str:
    """The sender of a message that came from node `origin`, never a local one: an
    address without a node, or naming this one, names `origin`; a malformed one is
    `unknown` there."""
    try:
        handle, node = split_address(sender, "from")
    except WireError:
        handle, node = "unknown", None  # no part of a malformed address is believed
    if node is None or node == own:
        node = origin
    return f"{handle}@{node}"


class Directory:
    """The nodes seen by this node's bridge: name -> (last heartbeat ms, live handles)."""

    def __init__(self, path: str, own: str, wall: WallClock = SYSTEM_WALL):
        self.path = path
        self.wall = wall  # heartbeats are epoch ms: "seen within forget_after" is wall time
        self.own = own
        self.nodes: dict[str, NodeInfo] = {}
        self.forget_after = FORGET_AFTER  # the bridge's --forget-after, as it last said
        try:
            with open(path, "rb") as f:
                entries = json.loads(f.read())
            for entry in entries:
                try:
                    n = msgspec.convert(entry, NodeInfo)
                except msgspec.ValidationError:
                    continue  # a damaged entry: the bridge reports that node again
                if is_handle(n.node):
                    self.nodes[n.node] = n
        except (OSError, ValueError, TypeError):
            pass  # no directory yet (or a damaged one): the bridge refills it

    def knows(self, node: str, now_ms: int | None = None) -> bool:
        """This node, or one seen within `forget_after` (a node gone quieter than that is
        forgotten: mail to it is refused, not queued for ever)."""
        if node == self.own:
            return True
        n = self.nodes.get(node)
        if n is None:
            return False
        now = self.wall.wall_ms() if now_ms is None else now_ms
        return now - n.seen_ms <= self.forget_after * 1000

    def update(self, nodes: list[NodeInfo], now_ms: int | None = None) -> list[str]:
        """Replace the directory with what the bridge just read; the nodes forgotten. Saved
        only when the set of nodes changed (a heartbeat changes only the times)."""
        now = self.wall.wall_ms() if now_ms is None else now_ms
        fresh: dict[str, NodeInfo] = {}
        for n in nodes:
            if not is_handle(n.node) or n.node == self.own:
                continue
            if now - n.seen_ms > self.forget_after * 1000:
                continue
            fresh[n.node] = NodeInfo(node=n.node, seen_ms=min(n.seen_ms, now), handles=n.handles)
        changed = fresh.keys() != self.nodes.keys()
        forgotten = sorted(self.nodes.keys() - fresh.keys())
        self.nodes = fresh
        if changed:
            replace_file(self.path, msgspec.json.encode(self.listing()))
        return forgotten

    def listing(self) -> list[NodeInfo]:
        now = self.wall.wall_ms()
        return sorted(
            (n for n in self.nodes.values() if self.knows(n.node, now)), key=lambda n: n.node
        )


RESTART_MOST = 30.0
STEADY = 60.0  # a bridge that ran this long gets a fresh backoff when it exits


async def supervise(
    bench_dir: str,
    node: str,
    url: str,
    helper_pids: set[int],
    log: Log,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`helper_pids` is the daemon's set of its own children acting for the operator."""
    task_status.started()
    bridge = [sys.executable, "-m", "bench_cli.entry", "bridge"]
    argv = [*bridge, "--dir", bench_dir, "--nats", url, "--node", node]
    delay = 1.0
    while True:
        started = trio.current_time()
        # Opening a local log file for append does not block in any way that matters.
        with open(os.path.join(bench_dir, "bridge.out"), "ab") as out:  # noqa: ASYNC230
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        # The bridge is a client of this daemon acting for the operator: identity must
        # not take it for a process that left a session, nor the orphan reaper collect it.
        helper_pids.add(proc.pid)
        try:
            await proc.wait()
        finally:
            helper_pids.discard(proc.pid)
            if proc.returncode is None:
                proc.kill()
        log.warning("bridge exited", code=proc.returncode)
        if proc.returncode == EXIT_USAGE:
            log.error("bridge refused its options; not restarted (see bridge.out)")
            return
        if trio.current_time() - started > STEADY:
            delay = 1.0
        await trio.sleep(delay)
        delay = min(delay * 2, RESTART_MOST)
