"""The catalogue of error codes (one per kind of refusal) and the CLI's exit codes for
them. Free of imports: the CLI's fast path uses it.
"""

# code -> what it means (the default sentence; daemons usually say something more precise)
CODES: dict[str, str] = {
    # framing and decoding
    "bad-json": "The line is not valid JSON.",
    "bad-utf8": "The line is not valid UTF-8.",
    "not-object": "A request must be a JSON object.",
    "unknown-verb": "The verb is not one this daemon knows.",
    "bad-request": "A field is missing or has the wrong type.",
    "frame-too-long": "The line is longer than the frame cap; the connection is closed.",
    # addresses and identity
    "bad-handle": "A handle is 1-64 characters of a-z 0-9 . _ - starting with a letter or digit.",
    "handle-taken": "A live session already holds that handle.",
    "handle-reserved": "That handle is reserved and cannot be claimed by a session.",
    "forbidden": "That is not allowed for this caller.",
    "bad-token": "The session secret is not valid (forged, or its session has ended).",
    "peer-refused": "Connections are accepted only from the daemon's own user.",
    "unplaceable": "The connecting process is neither a session nor the operator (it left its session, or it is gone).",
    # mail
    "bad-id": "A message id has the form 20261130T045611.123Z-0001.",
    "no-such-message": "No message with that id is in that mailbox.",
    "no-unread": "The mailbox has no unread message.",
    "bad-mail-file": "A message file cannot be read or parsed (edited by hand?); it was left where it is.",
    "body-too-large": "The body is larger than the body cap.",
    "subject-too-long": "The subject is longer than the subject cap.",
    "bad-subject": "A subject is one line without control characters.",
    "bad-key": "A key is 1-256 characters without control characters; 'outbox:' starts only bench's own.",
    "key-used": "That key already names another request.",
    "key-conflict": "That key already names a message with another recipient or body.",
    "bad-limit": "A limit is between 1 and the list maximum.",
    "bad-cursor": "The cursor is not one a listing returned.",
    "bad-query": "A search query needs at least one word (at most 1000 characters).",
    "bad-since": "A time is ISO-8601 UTC, such as 2026-11-30T04:56:11Z.",
    "rate-limited": "The sender sends (or, for a session, spawns jobs) faster than its limit; try again later (retry_after seconds where given).",
    "mailbox-full": "The recipient's mailbox holds as much unread mail as its limit allows.",
    "too-many-recipients": "A message carries more reply-to addresses than the limit.",
    # sessions and jobs
    "no-such-session": "No live session has that handle or id.",
    "bad-regex": "The ready pattern is not a valid regular expression.",
    "bad-pattern": "The pattern needs backreferences or lookaround (patterns run in linear time), or is too long.",
    "spawn-failed": "The command could not be started.",
    "isolation-unavailable": "--isolation required, but sessions cannot be sandboxed here (no working bwrap).",
    "bad-env": "An environment entry is KEY=VALUE with a non-empty KEY.",
    "not-in-session": "That command works only inside a bench session.",
    "no-job": "This session is not running a job.",
    "bad-mail": "The job mail could not be used.",
    "too-many-children": "The spawning session already has as many unsettled jobs as allowed.",
    "too-deep": "The new job would be deeper in the delegation tree than allowed.",
    "bad-duration": "A duration is a positive number with a unit (90s, 10m, 1h), at most the daemon's maximum.",
    # waits
    "timeout": "The wait ended at its timeout before anything matching arrived.",
    "would-deadlock": "The wait would close a cycle of waits (each waiting on the next); it was refused.",
    "too-many-waits": "The caller (or the daemon) already has as many waits as allowed.",
    # nodes and the bridge
    "bad-node": "A node name is 1-64 characters of a-z 0-9 . _ - starting with a letter or digit.",
    "unknown-node": "No node of that name has been seen by this node's bridge.",
    "wrong-node": "The message is addressed to another node.",
    "bad-url": "The NATS URL is not one the bridge understands.",
    "insecure-url": "A nats:// URL to another host needs TLS (or --insecure).",
    "bad-tls": "The TLS certificate or key files could not be used.",
    "node-mismatch": "The bridge's --node differs from its daemon's node name.",
    "nats-unreachable": "NATS could not be reached or refused the bridge.",
    "node-name-taken": "Another bridge is already heartbeating under this node name.",
    "forged-sender": "A node may send only from its own addresses.",
    "expired": "The message waited longer than the maximum age and was returned.",
    "stream-misconfigured": "The NATS stream or directory bucket is not configured as bench expects (bench nodes init).",
    "stream-missing": "The NATS stream or directory bucket does not exist (bench nodes init).",
    "nats-refused": "NATS refused to create or update the streams (the administrator's user is needed).",
    "new-mailbox-rate": "That node has made more new mailboxes here this hour than the receiving bridge allows.",
    "bad-entry": "A directory entry is not a node entry (wrong types or name).",
    "entry-too-large": "A directory entry is larger than the entry cap.",
    "too-many-handles": "A directory entry lists more handles than the cap.",
    "too-many-nodes": "The directory holds more nodes than the cap; the least recent were left out.",
    # daemon
    "disk-full": "The disk is full; nothing was written.",
    "io-error": "The disk refused the write; nothing was written.",
    "too-many-connections": "The daemon is at its connection limit; try again shortly.",
    "idle-timeout": "The connection was closed after a time with no request.",
    "slow-consumer": "The stream was ended because the client did not keep up.",
    "shutting-down": "The daemon is stopping.",
    "internal": "The daemon hit an internal error; it was logged and the daemon is still serving.",
    # CLI-side
    "usage": "The command line is not one bench understands.",
    "options-differ": "The running daemon was started with other options (bench up --restart).",
    "no-daemon": "No daemon is answering on this BENCH_DIR.",
    "socket-path-too-long": "The socket path is longer than AF_UNIX allows.",
    "protocol": "The daemon's answer could not be understood.",
    "mcp-missing": "bench mcp needs the optional MCP SDK: pip install 'bench[mcp]'.",
    "daemon-not-ours": "The process serving the socket runs as another user; nothing was sent.",
    "unsafe-dir": "BENCH_DIR is not safe to use (another owner, loose modes, or a link).",
    "bad-dir": "BENCH_DIR is a file, or lies under one, or is missing and cannot be made.",
    "bad-stdin": "Standard input is not valid UTF-8.",
    "bad-team-file": "The team file (bench.toml) is not valid TOML or has a wrong key or value.",
}

# Refusals that say "not now" rather than "never": the bridge asks JetStream to deliver
# such a message again later instead of returning it to its sender.
TRANSIENT_CODES = frozenset(
    {"disk-full", "io-error", "shutting-down", "internal", "too-many-connections"}
)

# CLI exit codes, as a named table (documented in docs/cli.md).
EXIT_OK = 0
EXIT_REFUSED = 1  # the daemon answered with an error
EXIT_USAGE = 2  # bad command line (click's own code)
EXIT_NO_DAEMON = 3  # nothing answers on the socket
EXIT_PROTOCOL = 4  # the answer could not be understood, or the connection broke
EXIT_NOT_OURS = 5  # the socket is served by another user's process: nothing was sent

EXIT_TIMEOUT = 6  # a wait (mail wait, job wait) ended at its timeout
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it; nothing is printed

EXIT_CODES = {
    "usage": EXIT_USAGE,
    "no-daemon": EXIT_NO_DAEMON,
    "socket-path-too-long": EXIT_USAGE,
    "protocol": EXIT_PROTOCOL,
    "mcp-missing": EXIT_USAGE,
    "bad-url": EXIT_USAGE,
    "insecure-url": EXIT_USAGE,
    "bad-tls": EXIT_USAGE,
    "daemon-not-ours": EXIT_NOT_OURS,
    "unsafe-dir": EXIT_USAGE,
    "bad-dir": EXIT_USAGE,
    "bad-stdin": EXIT_USAGE,
    "bad-team-file": EXIT_USAGE,
    # A value given out of range or form is a bad command line, whoever found it (the
    # CLI's parser or the daemon): exit 2 as every usage error.
    "bad-limit": EXIT_USAGE,
    "bad-duration": EXIT_USAGE,
    "bad-since": EXIT_USAGE,
    "timeout": EXIT_TIMEOUT,
}


def exit_code_for(code: str) -> int:
    """The CLI's exit code for an error code: 1 for every daemon refusal."""
    return EXIT_CODES.get(code, EXIT_REFUSED)


class WireError(Exception):
    """An error with a catalogue code and a human sentence (raised on either side)."""

    def __init__(self, code: str, message: str | None = None, retry_after: float | None = None):
        self.code = code
        self.message = message or CODES.get(code, code)
        self.retry_after = retry_after  # rate-limited: seconds until it would fit
        super().__init__(f"{self.code}: {self.message}")


class Disconnected(WireError):
    """No daemon answers (`no-daemon`), or the connection to it broke (`protocol`): a
    request in flight may or may not have been carried out; only a new connection goes on."""
