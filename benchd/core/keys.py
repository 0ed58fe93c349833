"""Idempotency keys: what a caller may choose (1-KEY_MAX characters without control
characters; `outbox:` keys are bench's own), and the keys bench derives from them: a
job's reply key, `outbox:<job key>:reply:<n>` (docs/jobs.md), and a reply's key per
recipient, `<key>:<address>` (docs/protocol.md).
"""

from bench_wire.addresses import is_address
from bench_wire.errors import WireError
from benchd.core.frontmatter import check_subject

KEY_MAX = 256  # the one limit a user meets (bench_wire/errors.py says it too)
RESERVED = "outbox:"  # the prefix of bench's own keys
_REPLY = ":reply:"
_BAD_KEY = f"a key is 1-{KEY_MAX} characters without control characters"


def is_key(key: str) -> bool:
    """A key a caller may choose (the reserved prefix aside)."""
    return 1 <= len(key) <= KEY_MAX and check_subject(key) is None


def check_client_key(key: str) -> None:
    """Refuse a caller's key that breaks the rule or takes a reserved one."""
    if not is_key(key):
        raise WireError("bad-key", _BAD_KEY)
    if key.startswith(RESERVED):
        raise WireError("bad-key", f"keys starting with {RESERVED!r} are reserved for job replies")


def reply_key(job_key: str, index: int) -> str:
    return f"{RESERVED}{job_key}{_REPLY}{index}"


def job_key_of(key: str) -> str | None:
    """The job key a reply key was derived from; None if `key` is no reply key."""
    if not key.startswith(RESERVED):
        return None
    # rpartition: the job key may itself contain ":reply:"; the index is the last part.
    inner, sep, index = key[len(RESERVED) :].rpartition(_REPLY)
    if sep and index.isdecimal() and index.isascii() and 1 <= len(inner) <= KEY_MAX:
        return inner
    return None


def recipient_key(key: str, to: str) -> str:
    """The key of one of several sends made for one keyed request (one per recipient:
    a handle, or handle@node)."""
    return f"{key}:{to}"


def check_key(key: str) -> None:
    """Refuse a key the mailroom must not store: neither a caller's nor one bench derives
    (a job's reply key, or one of `recipient_key`'s)."""
    if is_key(key):
        return
    inner, sep, to = key.rpartition(":")
    derived = job_key_of(key) is not None or (bool(sep) and is_address(to) and is_key(inner))
    if check_subject(key) is None and derived:
        return
    raise WireError("bad-key", _BAD_KEY)
