"""Refusals come back: a message from another node that this node refuses (a bad
handle, a key already used, a full mailbox, too old) is returned to its sender as mail
from `postmaster@<this node>`, through the outbound queue like any other mail to that
node, so the sender learns of it with the queue's guarantees. Pure text and names here;
the queueing is Outbound.bounce.

A bounce's key is derived from the original's origin, sender and key, so a redelivery
of the refused message queues nothing twice; a bounce is never bounced.
"""

import hashlib
import re

from benchd.core.frontmatter import check_subject

POSTMASTER = "postmaster"
SUBJECT_MOST = 200  # the mailroom's subject cap
_CODE_RE = re.compile(r"^  code:\s+(\S+)$", re.M)
_REASON_RE = re.compile(r"^  reason:\s+(.*)$", re.M)


def key_for(origin: str, sender: str, key: str) -> str:
    digest = hashlib.sha256(f"{origin}\n{sender}\n{key}".encode()).hexdigest()[:40]
    return f"bounce-{digest}"


def is_bounce(sender: str) -> bool:
    return sender.partition("@")[0] == POSTMASTER


def subject(code: str, original: str) -> str:
    text = f"Undelivered [{code}]: {original}" if original else f"Undelivered [{code}]"
    text = text[:SUBJECT_MOST]
    return text if check_subject(text) is None else f"Undelivered [{code}]"[:SUBJECT_MOST]


def body(
    node: str, mail_id: str, to: str, original_subject: str, key: str, code: str, reason: str
) -> str:
    one_line = " ".join(reason.split())[:500]
    return (
        f"Your message could not be delivered on node {node}; nothing of it was kept there.\n"
        "\n"
        f"  id:      {mail_id}\n"
        f"  to:      {to}\n"
        f"  subject: {' '.join(original_subject.split())}\n"
        f"  key:     {key}\n"
        f"  code:    {code}\n"
        f"  reason:  {one_line}\n"
    )


def parse(text: str) -> tuple[str, str]:
    """(code, reason) from a bounce's body; ("", "") when it does not say."""
    code = _CODE_RE.search(text)
    reason = _REASON_RE.search(text)
    return (code.group(1) if code else "", reason.group(1) if reason else "")
