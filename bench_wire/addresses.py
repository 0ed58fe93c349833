"""Handles, node names and addresses (docs/nodes.md, "Addresses"): the one rule for each,
for the daemon and the bridge. `split_address` is the one place an address is taken
apart; `resolve` the one place the daemon decides where one leads. Pure: no I/O.
"""

import re
from collections.abc import Callable
from typing import TypeGuard

from bench_wire.errors import WireError

HANDLE_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def is_handle(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and HANDLE_RE.fullmatch(value) is not None and value != ".."


def check_handle(
    value: object, what: str = "handle", code: str = "bad-handle", noun: str = "a handle"
) -> str:
    """The handle, or a bad-handle error (for a node name, `check_node`'s code)."""
    if not is_handle(value):
        raise WireError(
            code,
            f"{what} {value!r} is not {noun}: use 1-64 characters of a-z 0-9 . _ - "
            "starting with a letter or digit",
        )
    return value


def check_node(value: object, what: str = "node") -> str:
    return check_handle(value, what, "bad-node", "a node name")


def split_address(value: object, what: str = "address") -> tuple[str, str | None]:
    """`bob@node2` -> ("bob", "node2"); `bob` -> ("bob", None). Both parts are checked
    (bad-handle naming `what`, or bad-node)."""
    if not isinstance(value, str):
        raise WireError("bad-handle", f"{what} {value!r} is not an address")
    handle, at, node = value.partition("@")
    if not at:
        return check_handle(handle, what), None
    # Both errors name the whole address, so the part at fault is seen in its place.
    check_handle(handle, f"{what} {value!r}: handle")
    return handle, check_node(node, f"{what} {value!r}: node")


def is_address(value: object) -> bool:
    try:
        split_address(value)
    except WireError:
        return False
    return True


def check_address(value: object, what: str = "address") -> str:
    """The address itself, once `split_address` found both its parts good."""
    handle, node = split_address(value, what)
    return handle if node is None else f"{handle}@{node}"


def resolve(
    value: object,
    own: str | None,
    knows: Callable[[str], bool] | None = None,
    what: str = "address",
) -> tuple[str, str | None]:
    """Where an address leads, seen from the node named `own`: (handle, None) for a
    mailbox here, (handle, node) for one on another node, which `knows` (the daemon's
    directory) must know (unknown-node)."""
    handle, node = split_address(value, what)
    if node is None or node == own:
        return handle, None
    if knows is not None and not knows(node):
        raise WireError(
            "unknown-node",
            f"no node named {node} has been seen (bench nodes lists the known ones); "
            "start its bridge, or check the name",
        )
    return handle, node
