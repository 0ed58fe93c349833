"""The bridge's options and the administrator's quotas, each declared once here: name,
type, default and help. `bench bridge` and `bench nodes init` make their flags from
these fields (a field with help is a flag: `new_mailboxes_per_hour` is
`--new-mailboxes-per-hour`), so this module needs nothing beyond the standard library:
their --help works without the bridge extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench_bridge.urls import Connection

ENTRY_MAX = 16 * 1024  # bytes of one directory entry
HANDLES_MAX = 512  # live handles listed in one entry
NODES_MAX = 256  # nodes kept from the directory (the most recently seen)
FORGET_S = 7 * 86400.0  # a node not seen for this long is forgotten
REPLY_TO_MAX = 16  # reply-to addresses in one message from another node
NEW_MAILBOXES_PER_HOUR = 120  # per origin node
RECEIPTS_PER_MINUTE = 6000  # receipts taken from one origin node per minute


def flag(default: float, help_: str) -> Any:
    """A field that is also a command-line flag, with its help."""
    return field(default=default, metadata={"help": help_})


@dataclass(frozen=True)
class Options:
    """What `bench bridge` was started with (its command line), whole."""

    bench_dir: str
    conn: Connection
    node: str | None = None
    heartbeat: float = flag(5.0, "seconds between directory heartbeats")
    ack_wait: float = flag(
        30.0, "seconds before JetStream redelivers a message this bridge did not ack"
    )
    retry_max: float = 30.0  # the longest pause between retries of a failed NATS step
    forget_after: float = flag(
        FORGET_S, "seconds after which a node not seen is forgotten (mail to it: unknown-node)"
    )
    max_age: float = flag(
        7 * 86400.0,
        "seconds mail may wait in NATS for this node before it is returned to its sender",
    )
    entry_max: int = flag(ENTRY_MAX, "bytes of one directory entry")
    handles_max: int = flag(HANDLES_MAX, "handles in one directory entry")
    nodes_max: int = flag(NODES_MAX, "nodes kept from the directory")
    publish_window: int = flag(
        1024, "messages published to NATS and awaiting their PubAck, at most"
    )
    reply_to_max: int = flag(
        REPLY_TO_MAX, "reply-to addresses in one message from another node (more: bounced)"
    )
    new_mailboxes_per_hour: int = flag(
        NEW_MAILBOXES_PER_HOUR,
        "new mailboxes one other node may make here per hour (more: bounced)",
    )
    receipts_per_minute: int = flag(
        RECEIPTS_PER_MINUTE, "receipts one other node may send here per minute (more: dropped)"
    )


@dataclass(frozen=True)
class Quotas:
    """What `bench nodes init` sets; the bridge only requires that quotas exist."""

    max_bytes: int = flag(
        1024**3, "the mail stream's quota: bytes of mail waiting in NATS, all nodes together"
    )
    # nats-server's default max_payload
    max_msg_size: int = flag(1024 * 1024, "bytes of one message in the mail stream")
    # twice the bridges' --max-age: expired mail is bounced before the stream drops it
    max_age: float = flag(
        14 * 86400.0,
        "seconds NATS keeps a message no node took (at least the bridges' --max-age)",
    )
    forget_after: float = flag(FORGET_S, "seconds a directory entry is kept without a heartbeat")
    directory_max_bytes: int = flag(64 * 1024 * 1024, "the directory bucket's quota in bytes")
