"""The bridge's own host: the lines it says, and its connections to its local daemon.

`say` writes one line on stderr (bridge.out when the daemon runs the bridge).

The bridge keeps its connections for its whole life, and some stay quiet for hours
(no inbound mail, nothing to mark). The daemon closes a connection that waited
`--idle-timeout` seconds for a request; `bench_wire.asyncclient.KeptClient` then opens
a new one and sends the request again. That is safe for every bridge verb: a pull
reads, a report says the state again, and a mark, a delivery or a bounce of the same
message is a no-op the second time (the daemon takes them by mail id and key), so a
retry never writes anything twice. Only when a new connection cannot be opened is the
daemon gone (`no-daemon`).

The framing, the answer matching and the error frames are bench_wire's
(`bench_wire.clientproto`), as for every other client.
"""

import sys

from bench_wire.asyncclient import KeptClient
from bench_wire.messages import StructCodec


def say(text: str) -> None:
    print(f"bench bridge: {text}", file=sys.stderr, flush=True)


async def open_local(bench_dir: str) -> KeptClient:
    """A connection of its own to the daemon of `bench_dir`, answering with
    `bench_wire.messages` Structs (Disconnected `no-daemon` if nothing answers)."""
    return await KeptClient(bench_dir, codec=StructCodec()).connect()
