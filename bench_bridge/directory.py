"""The node directory (the BENCH_NODES key-value bucket), read as untrusted input. Pure.

Whoever may write the bucket may put anything in it, so every entry is decoded with a
strict type and checked: a bad entry is skipped (and reported once), never fatal. Each
entry's size and handle count are capped, and so is the number of nodes kept, so that
the directory always fits in one report to the daemon. `seen` is clamped to now (a
clock ahead, or a forged time, cannot make a node look alive for ever), and a node not
seen for `forget_s` is left out: mail to it is then refused as `unknown-node`.

An entry also names the bridge instance that wrote it (an id kept in BENCH_DIR), so a
second bridge using a node name that is already heartbeating can tell and refuse.
"""

import re
from dataclasses import dataclass

import msgspec

from bench_wire.messages import NodeInfo

NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # a handle or node name (benchd.core.names)
ENTRY_MAX = 16 * 1024  # bytes of one entry
HANDLES_MAX = 512  # live handles listed in one entry
NODES_MAX = 256  # nodes kept from the directory (the most recently seen)
FORGET_S = 7 * 86400.0  # a node not seen for this long is forgotten


class Entry(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """One node's entry, as its bridge puts it under its own name."""

    node: str
    seen_ms: int
    handles: list[str] = []
    instance: str = ""


_dec = msgspec.json.Decoder(Entry)
_enc = msgspec.json.Encoder()


@dataclass
class Limits:
    entry_max: int = ENTRY_MAX
    handles_max: int = HANDLES_MAX
    nodes_max: int = NODES_MAX
    forget_s: float = FORGET_S


class Skip(Exception):
    """An entry that is not used: `code` says why, the message says how."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def is_name(value: str) -> bool:
    return NAME_RE.fullmatch(value) is not None and value != ".."


def key_of(node: str) -> str:
    """A node's key in the bucket: its name (`$KV.BENCH_NODES.<name>`, the subject a
    node's NATS user is allowed to write)."""
    return node


def encode(node: str, seen_ms: int, handles: list[str], instance: str) -> bytes:
    return _enc.encode(Entry(node=node, seen_ms=seen_ms, handles=handles, instance=instance))


def decode(key: str, raw: bytes, now_ms: int, limits: Limits) -> Entry:
    """The entry under `key`, checked and with `seen` clamped to now; raises Skip."""
    if len(raw) > limits.entry_max:
        raise Skip(
            "entry-too-large",
            f"the entry {key!r} is {len(raw)} bytes, more than the cap of {limits.entry_max}",
        )
    try:
        e = _dec.decode(raw)
    except msgspec.DecodeError as err:
        raise Skip("bad-entry", f"the entry {key!r} is not a node entry: {err}") from None
    if not is_name(e.node) or key_of(e.node) != key:
        raise Skip("bad-entry", f"the entry {key!r} names node {e.node!r}, not its own key")
    if len(e.handles) > limits.handles_max:
        raise Skip(
            "too-many-handles",
            f"the entry {key!r} lists {len(e.handles)} handles, more than the cap of "
            f"{limits.handles_max}",
        )
    bad = next((h for h in e.handles if not is_name(h)), None)
    if bad is not None:
        raise Skip("bad-entry", f"the entry {key!r} lists {bad!r}, which is not a handle")
    e.seen_ms = min(e.seen_ms, now_ms)
    return e


def listing(
    entries: list[Entry], own: str, now_ms: int, limits: Limits
) -> tuple[list[NodeInfo], int]:
    """The other nodes to report: seen within `forget_s`, at most `nodes_max` of them
    (the most recently seen); and how many were left out for the cap."""
    cutoff = now_ms - limits.forget_s * 1000
    alive = [e for e in entries if e.node != own and e.seen_ms >= cutoff]
    alive.sort(key=lambda e: -e.seen_ms)
    kept = [
        NodeInfo(node=e.node, seen_ms=e.seen_ms, handles=e.handles)
        for e in alive[: limits.nodes_max]
    ]
    return kept, len(alive) - len(kept)


def taken_by(entry: Entry | None, instance: str, now_ms: int, fresh_ms: float) -> str | None:
    """The other instance heartbeating under our name, or None. An entry by another
    instance that has gone quiet (older than `fresh_ms`) is a predecessor, not a rival."""
    if entry is None or not entry.instance or entry.instance == instance:
        return None
    return entry.instance if now_ms - entry.seen_ms <= fresh_ms else None
