"""The bridge's options (the `bench bridge` command line), with their defaults."""

from bench_bridge import admission, directory
from bench_bridge.urls import Connection

MAX_AGE_S = 7 * 86400.0  # mail not taken from the stream within this long is bounced
PUBLISH_WINDOW = 1024  # messages published and awaiting their PubAck, at most


class Options:
    def __init__(
        self,
        bench_dir: str,
        conn: Connection,
        node: str | None = None,
        heartbeat: float = 5.0,
        ack_wait: float = 30.0,
        retry_max: float = 30.0,
        forget_after: float = directory.FORGET_S,
        max_age: float = MAX_AGE_S,
        entry_max: int = directory.ENTRY_MAX,
        handles_max: int = directory.HANDLES_MAX,
        nodes_max: int = directory.NODES_MAX,
        publish_window: int = PUBLISH_WINDOW,
        reply_to_max: int = admission.REPLY_TO_MAX,
        new_mailboxes_per_hour: int = admission.NEW_MAILBOXES_PER_HOUR,
        receipts_per_minute: int = admission.RECEIPTS_PER_MINUTE,
    ) -> None:
        self.bench_dir, self.conn, self.node = bench_dir, conn, node
        self.heartbeat, self.ack_wait = heartbeat, ack_wait
        self.retry_max = retry_max
        self.max_age = max_age
        self.publish_window = publish_window
        self.reply_to_max = reply_to_max
        self.new_mailboxes_per_hour = new_mailboxes_per_hour
        self.receipts_per_minute = receipts_per_minute
        self.limits = directory.Limits(
            entry_max=entry_max,
            handles_max=handles_max,
            nodes_max=nodes_max,
            forget_s=forget_after,
        )
