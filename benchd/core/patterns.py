"""Patterns a session or the operator supplies and the daemon runs (a session's ready
pattern): compiled by RE2, whose matching time grows linearly with the text, never
exponentially, so no pattern can hold the event loop (Python's `re` backtracks:
`(a+)+$` against 27 `a`s and a `!` takes seconds, and each `a` more doubles it).

RE2 has no backreferences and no lookaround; a pattern that needs them is refused with
`bad-pattern` (a pattern that is not a regular expression at all is `bad-regex`). The
text a pattern is matched against is cut to its last MATCH_CHARS characters, so the
work per match is bounded by that too. Pure: no I/O.
"""

import re
from typing import Protocol

import re2

from bench_wire.errors import WireError

MATCH_CHARS = 4096  # the most text one match looks at (the end of it is kept)
PATTERN_CHARS = 1000  # the longest pattern accepted

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would write each refusal to the daemon's stderr


class Pattern(Protocol):
    def search(self, text: str) -> object | None: ...


class Compiled:
    """A compiled pattern; `search` looks at the end of the text only (MATCH_CHARS)."""

    __slots__ = ("source", "_re")

    def __init__(self, source: str, compiled: Pattern) -> None:
        self.source = source
        self._re = compiled

    def search(self, text: str) -> object | None:
        """The match in the end of `text`, or None."""
        tail = text[-MATCH_CHARS:]
        try:
            return self._re.search(tail)
        except UnicodeEncodeError:  # RE2 reads UTF-8: a lone surrogate becomes U+FFFD
            return self._re.search(tail.encode("utf-8", "replace").decode("utf-8"))


def compile_pattern(source: str, what: str = "ready pattern") -> Compiled:
    """The pattern compiled by RE2, multi-line (`^` and `$` match at each line), or a
    WireError: `bad-regex` (not a regular expression) or `bad-pattern` (one RE2 cannot
    run in linear time: backreferences, lookaround)."""
    if not isinstance(source, str):
        raise WireError("bad-regex", f"the {what} must be text")
    if len(source) > PATTERN_CHARS:
        raise WireError(
            "bad-pattern",
            f"the {what} is {len(source)} characters; the limit is {PATTERN_CHARS}",
        )
    try:
        compiled = re2.compile("(?m)" + source, _OPTIONS)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        try:
            re.compile(source)
        except re.error as py_err:
            raise WireError("bad-regex", f"{what} {source!r}: {py_err}") from None
        raise WireError(
            "bad-pattern",
            f"{what} {source!r} needs what bench does not run ({reason}): patterns are "
            "matched in linear time, without backreferences or lookaround",
        ) from None
    return Compiled(source, compiled)
