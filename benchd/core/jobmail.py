"""The job mail's data: addresses, the mail itself and the refusals, with no I/O.

Part of the job fan-out core (:mod:`benchd.core.jobs` re-exports every name here and
describes the concepts): an **Address** names an agent (a handle) in a session; a
**JobMail** is a job's task mail or one of its replies. Both check themselves when
built, so a value of either type is always valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from benchd.core.keys import KEY_MAX, is_job_key

MAX_ID_LEN = 256
"""Longest agentId or sessionId, in characters."""

T = TypeVar("T")

MAX_KEY_LEN = KEY_MAX
"""Longest mail key a caller may choose, in characters (derived reply keys may be longer)."""


class JobError(ValueError):
    """A refusal: ``code`` is a stable kebab-case word, ``message`` a human sentence.

    Codes: ``bad-address``, ``bad-id``, ``bad-key``, ``bad-mail``, ``bad-work``,
    ``mail-mismatch``, ``bad-job``, ``bad-outcome``, ``bad-content``, ``bad-config``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# --------------------------------------------------------------------------- validation


def check_id(value: object, what: str) -> str:
    """`value` if it is an id (a 1-MAX_ID_LEN character string), else a `bad-id` refusal."""
    if not isinstance(value, str):
        raise JobError("bad-id", f"{what} must be a string, not {type(value).__name__}.")
    if not 1 <= len(value) <= MAX_ID_LEN:
        raise JobError(
            "bad-id", f"{what} must be 1 to {MAX_ID_LEN} characters long, not {len(value)}."
        )
    return value


def _check_key(value: object) -> str:
    if not isinstance(value, str):
        raise JobError("bad-key", f"a mail key must be a string, not {type(value).__name__}.")
    # The mailroom's rule (benchd.core.keys), so a job never takes a key it would refuse.
    # Reply mails are keyed by their outbox row, the caller's key plus a suffix: that
    # derived form is accepted too, so a 256-character task key still gets replies.
    if is_job_key(value):
        return value
    raise JobError(
        "bad-key",
        f"a mail key must be 1 to {MAX_KEY_LEN} characters long without control characters.",
    )


def _check_ms(value: object, what: str) -> int:
    # bool is an int subclass; True is not a time.
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobError("bad-mail", f"{what} must be an integer of milliseconds.")
    if value < 0:
        raise JobError("bad-mail", f"{what} must not be negative.")
    return value


def require_mapping(value: object, code: str, what: str) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else a refusal with `code`."""
    if not isinstance(value, Mapping):
        raise JobError(code, f"{what} must be a JSON object, not {type(value).__name__}.")
    return value


# --------------------------------------------------------------------------- addresses, mail


def decode_json(data: object, typ: type[T], code: str, what: str) -> T:
    """`data` (parsed JSON) as a `typ`, decoded by msgspec; a refusal names what was
    wrong: the value's own check's code when it made one, else `code`."""
    obj = require_mapping(data, code, what)
    try:
        return msgspec.convert(obj, typ)
    except msgspec.ValidationError as err:
        cause = err.__cause__
        if isinstance(cause, JobError):  # a value's own check (__post_init__)
            raise JobError(cause.code, cause.message) from None
        raise JobError(code, f"{what} is not valid: {err}.") from None


class Address(msgspec.Struct, frozen=True, rename="camel", tag_field="kind", tag="agent"):
    """An agent address: which agent (handle) in which session. Its JSON form names its
    kind (``"kind": "agent"``, the only kind there is)."""

    agent_id: str
    session_id: str

    def __post_init__(self) -> None:
        check_id(self.agent_id, "agentId")
        check_id(self.session_id, "sessionId")

    @property
    def kind(self) -> str:
        return "agent"

    def to_json(self) -> dict[str, str]:
        """The wire form: ``{"kind": "agent", "agentId": ..., "sessionId": ...}``."""
        data: dict[str, str] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_json(cls, data: object) -> Address:
        """Parse the wire form; raises :class:`JobError` on anything else."""
        obj = require_mapping(data, "bad-address", "an address")
        if obj.get("kind") != "agent":
            raise JobError(
                "bad-address", f"an address kind must be 'agent', not {obj.get('kind')!r}."
            )
        # Anything else wrong with an address is in its ids.
        return decode_json(obj, cls, "bad-id", "an address")


class JobMail(msgspec.Struct, frozen=True, rename="camel"):
    """A mail: the task mail of a job, or a reply built by :class:`FanOut`.

    Immutable and hashable (``reply_to`` is a tuple). Its JSON form has camelCase keys
    (``from``, ``replyTo``, ``createdAt``) and ``outcome`` only on a reply.
    """

    key: str
    to: Address
    from_: Address = msgspec.field(name="from")
    reply_to: tuple[Address, ...]
    content: str
    created_at: int
    # A reply's outcome as its header says it (``completed``/``interrupted``), so the
    # host names the reply without reading its body; None for a task mail.
    outcome: str | None = None

    def __post_init__(self) -> None:
        # msgspec checks the types of what it decodes; a value built in code is checked
        # here as well, so a JobMail of either origin is valid.
        _check_key(self.key)
        if not isinstance(self.to, Address):
            raise JobError("bad-mail", "mail 'to' must be an Address.")
        if not isinstance(self.from_, Address):
            raise JobError("bad-mail", "mail 'from' must be an Address.")
        if not isinstance(self.reply_to, tuple):
            raise JobError("bad-mail", "mail 'replyTo' must be a tuple of addresses.")
        if not all(isinstance(a, Address) for a in self.reply_to):
            raise JobError("bad-mail", "every mail 'replyTo' entry must be an Address.")
        if not isinstance(self.content, str):
            raise JobError("bad-mail", "mail content must be a string.")
        _check_ms(self.created_at, "mail createdAt")
        if self.outcome is not None and not isinstance(self.outcome, str):
            raise JobError("bad-mail", "a reply outcome must be a string.")

    def to_json(self) -> dict[str, Any]:
        """The wire form with camelCase keys (``from``, ``replyTo``, ``createdAt``);
        ``outcome`` only on a reply."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        data["replyTo"] = list(data["replyTo"])  # JSON's shape: a list (as it was stored)
        if self.outcome is None:
            del data["outcome"]
        return data

    @classmethod
    def from_json(cls, data: object) -> JobMail:
        """Parse the wire form; raises :class:`JobError` on anything else."""
        return decode_json(data, cls, "bad-mail", "a mail")
