"""A message's one identity across nodes, and how references to it are written. Pure.

A message that crossed nodes is named everywhere by the id its sending node gave it,
`<id>@<node>`, kept in a received copy's `origin`. `in-reply-to` names the message
answered: bare within a node for mail sent from it, always full between nodes.
"""

from bench_wire.addresses import is_handle
from bench_wire.errors import WireError
from benchd.core.names import MAIL_ID_RE


def split_ref(value: object) -> tuple[str, str | None]:
    """`<id>` -> (id, None); `<id>@<node>` -> (id, node); else bad-id."""
    if isinstance(value, str):
        mail_id, at, node = value.partition("@")
        if MAIL_ID_RE.fullmatch(mail_id) and (not at or is_handle(node)):
            return mail_id, node if at else None
    raise WireError(
        "bad-id",
        f"{value!r} is not a message id (they look like 20261130T045611.123Z-0001, or "
        "20261130T045611.123Z-0001@node2 for a message as the node it was sent from named it)",
    )


def check_ref(value: object) -> str:
    mail_id, node = split_ref(value)
    return mail_id if node is None else f"{mail_id}@{node}"


def local(ref: str, own: str) -> str:
    """A reference as this node writes it: a message sent from here by its bare id."""
    mail_id, node = split_ref(ref)
    return mail_id if node == own else ref


def full(ref: str, own: str) -> str:
    """A reference as it crosses to another node: always with the node it names."""
    mail_id, node = split_ref(ref)
    return ref if node is not None else f"{mail_id}@{own}"


def received(ref: str, origin: str, own: str) -> str:
    """A reference in mail from node `origin`, as this node writes it: a bare id there
    (from a bench that sent bare ids) names a message of `origin`."""
    return local(full(ref, origin), own)


def identity(mail_id: str, origin: str | None, own: str) -> str:
    """A message's identity: its origin when it was received from another node, else
    its id here with this node's name."""
    return origin or f"{mail_id}@{own}"
