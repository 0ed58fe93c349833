"""What the bridge says: one line on stderr (bridge.out when the daemon runs it)."""

import sys


def say(text: str) -> None:
    print(f"bench bridge: {text}", file=sys.stderr, flush=True)
