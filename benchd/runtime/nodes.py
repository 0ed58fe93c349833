"""Nodes: a node is one BENCH_DIR's daemon, named like a handle; `bob@node2` is bob there.

Pure naming rules plus the directory the daemon keeps of the nodes its bridge has seen
(persisted in BENCH_DIR/nodes.json, so a daemon restarted without its bridge still
knows which nodes exist and queues mail for them instead of refusing it).
"""

import json
import re
import socket

import msgspec

from bench_wire.addresses import split_address
from bench_wire.errors import WireError
from bench_wire.messages import NodeInfo
from benchd.core.clock import SYSTEM_WALL, WallClock
from benchd.core.names import is_handle
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
    """The sender of a message that came from NATS, never a local one: an address
    without a node, or naming this node, is rewritten to name the node it came from
    (`origin`, already checked not to be this node); a malformed one is `unknown` there."""
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
        """Replace the directory with what the bridge just read (a node no longer in the
        bucket is forgotten); `seen` is clamped to now. Written atomically only when the
        set of nodes changed (a heartbeat alone changes only the in-memory times).
        Returns the nodes forgotten."""
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
            self.save()
        return forgotten

    def save(self) -> None:
        replace_file(self.path, msgspec.json.encode(self.listing()))

    def listing(self) -> list[NodeInfo]:
        now = self.wall.wall_ms()
        return sorted(
            (n for n in self.nodes.values() if self.knows(n.node, now)), key=lambda n: n.node
        )
