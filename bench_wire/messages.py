"""Every request, response and event on the wire, as msgspec Structs.

- Requests share one tagged base (`Request`, tag field `verb`) and decode through the
  `AnyRequest` union.
- Responses share `Response` (tag field `type`); each carries `id` (echoed from the
  request) and `ok`. Errors are `ErrorResponse` with `error: {code, message}`.
- Streams (`events` with follow, `session/tail`, `session/attach`) answer with frames of
  type `event` or `output` and end with one `end` frame (or an error frame).
- Events (the lines of events.jsonl) share `Event` (tag field `kind`); the daemon writes
  each as seq, ts, kind, then the fields, so the log can be searched by byte offset.

New fields always get defaults, so older peers keep decoding.
"""

import functools
import operator
from typing import Any, cast, get_args

# The types live in four modules by kind, each named once, where it is defined: every
# public name of those modules is re-exported here, so `from bench_wire import messages
# as m; m.X` stays the one way in, and each kind's members are found as the subclasses
# of its base (Request, Response, Event), in the order they are defined.
from bench_wire._events import *  # noqa: F403
from bench_wire._events import Event
from bench_wire._requests import *  # noqa: F403
from bench_wire._requests import Request
from bench_wire._responses import *  # noqa: F403
from bench_wire._responses import Response
from bench_wire._states import *  # noqa: F403

PROTOCOL_VERSION = 1


def _members(base: type) -> tuple[type, ...]:
    """The subclasses of `base` (theirs too), in the order they were defined: the
    decoders, the verb table and docs/protocol.md are all made from them."""
    found: list[type] = []
    sub: type
    for sub in base.__subclasses__():
        found += [sub, *_members(sub)]
    return tuple(found)


def _union(types: tuple[type, ...]) -> Any:
    """`A | B | ...` of the types, for a decoder (msgspec takes a union of tagged Structs)."""
    return functools.reduce(operator.or_, types)


REQUEST_TYPES = cast(tuple[type[Request], ...], _members(Request))
RESPONSE_TYPES = cast(tuple[type[Response], ...], _members(Response))
EVENT_TYPES = cast(tuple[type[Event], ...], _members(Event))
AnyRequest = _union(REQUEST_TYPES)
AnyResponse = _union(RESPONSE_TYPES)
AnyEvent = _union(EVENT_TYPES)
# Every request type has a string tag (its verb).
VERBS: dict[str, type[Request]] = {cast(str, t.__struct_config__.tag): t for t in REQUEST_TYPES}


def _answer_types(t: type[Request]) -> tuple[type[Response], ...]:
    # Each request's type parameter names its answer types (`Request["A | B"]`).
    (ref,) = get_args(t.__orig_bases__[0])  # type: ignore[attr-defined]
    names = ref.__forward_arg__.split("|")
    found: tuple[type[Response], ...] = tuple(globals()[n.strip()] for n in names)
    return found


# Request type -> the answer types its frames may have (besides an error frame and, for a
# stream, its end frame): the typed client checks every answer against it.
ANSWERS: dict[type[Request], tuple[type[Response], ...]] = {
    t: _answer_types(t) for t in REQUEST_TYPES
}

EVENT_KINDS: tuple[str, ...] = tuple(cast(str, t.__struct_config__.tag) for t in EVENT_TYPES)
