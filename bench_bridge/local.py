"""The bridge's own host: the lines it says (`say`: stderr, which is
bridge.out under the daemon), and its connections to its local daemon (KeptClient:
every bridge verb is safe to repeat; docs/nodes.md, "How a message travels").
"""

import sys

from bench_wire.asyncclient import KeptClient
from bench_wire.messages import StructCodec


def say(text: str) -> None:
    print(f"bench bridge: {text}", file=sys.stderr, flush=True)


async def open_local(bench_dir: str) -> KeptClient:
    """A connection of its own to the daemon of `bench_dir`, answering with Structs."""
    return await KeptClient(bench_dir, codec=StructCodec()).connect()
