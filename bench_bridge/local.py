"""The bridge's own host: its options, the lines it says (`say`: stderr, which is
bridge.out under the daemon), and its connections to its local daemon (KeptClient:
every bridge verb is safe to repeat; docs/nodes.md, "How a message travels").
"""

import sys
from dataclasses import dataclass

from bench_bridge import admission
from bench_bridge.urls import Connection
from bench_wire.asyncclient import KeptClient
from bench_wire.messages import StructCodec

MAX_AGE_S = 7 * 86400.0  # mail not taken from the stream within this long is bounced
PUBLISH_WINDOW = 1024  # messages published and awaiting their PubAck, at most


@dataclass(frozen=True)
class Options:
    """What `bench bridge` was started with (its command line), whole."""

    bench_dir: str
    conn: Connection
    node: str | None = None
    heartbeat: float = 5.0
    ack_wait: float = 30.0
    retry_max: float = 30.0
    forget_after: float = admission.FORGET_S
    max_age: float = MAX_AGE_S
    entry_max: int = admission.ENTRY_MAX
    handles_max: int = admission.HANDLES_MAX
    nodes_max: int = admission.NODES_MAX
    publish_window: int = PUBLISH_WINDOW
    reply_to_max: int = admission.REPLY_TO_MAX
    new_mailboxes_per_hour: int = admission.NEW_MAILBOXES_PER_HOUR
    receipts_per_minute: int = admission.RECEIPTS_PER_MINUTE

    @property
    def limits(self) -> admission.Limits:
        """The directory's caps (bench_bridge.admission)."""
        return admission.Limits(self.entry_max, self.handles_max, self.nodes_max, self.forget_after)


def say(text: str) -> None:
    print(f"bench bridge: {text}", file=sys.stderr, flush=True)


async def open_local(bench_dir: str) -> KeptClient:
    """A connection of its own to the daemon of `bench_dir`, answering with Structs."""
    return await KeptClient(bench_dir, codec=StructCodec()).connect()
