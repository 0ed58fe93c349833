"""The wake gate: when a wake may paste, when it presses Enter, and when it stops.

Pure decisions, in the manner of h11: the reactor feeds it facts (when output and input
were last seen, whether the ready pattern holds, whether the screen changed after an
Enter, the time) and carries out the action it answers, so every timing rule of a wake
is tested in-process. Its two phases, `readiness()` and `EnterCheck`, are
docs/reactor.md's "How a wake lands".
"""

import re
from dataclasses import dataclass
from typing import Protocol, TypeVar

import re2

from bench_wire.errors import WireError
from bench_wire.untrusted import strip

# A ready pattern may not match on a screen that is quiet yet unchanged: look again
# at least this often, whatever the gate (a gate of 0 must not spin).
MIN_SCREEN_WAIT_S = 0.25


@dataclass(frozen=True, slots=True)
class WaitForOutput:
    """Nothing printed yet: wait for the first byte of output."""


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Output or input was seen too recently: the gate opens at `at` (same clock)."""

    at: float


@dataclass(frozen=True, slots=True)
class WaitForScreen:
    """Quiet, but the ready pattern does not match: wait for the screen to change, at
    most `timeout` seconds, then ask again."""

    timeout: float


@dataclass(frozen=True, slots=True)
class LookAtScreen:
    """The gate is open: the ready pattern must be matched against the screen now
    (rendering the screen costs, so it is looked at only when it decides)."""


@dataclass(frozen=True, slots=True)
class Ready:
    """Paste now."""


Readiness = WaitForOutput | WaitUntil | LookAtScreen | WaitForScreen | Ready


@dataclass(frozen=True, slots=True)
class Activity:
    """What the reactor knows of a session at one moment (monotonic seconds)."""

    now: float
    last_output: float | None  # None until the first byte
    last_input: float  # operator keystrokes; 0.0 when none
    # the ready pattern matches the end of the screen (True if none); None: not looked
    shows_ready: bool | None = None


def idle_for(a: Activity) -> float | None:
    """Seconds without output or input, or None while nothing has been printed."""
    if a.last_output is None:
        return None
    return a.now - max(a.last_output, a.last_input)


def readiness(gate: float, a: Activity) -> Readiness:
    """May a wake paste now? If not, what to wait for."""
    idle = idle_for(a)
    if idle is None:
        return WaitForOutput()
    if idle < gate:
        return WaitUntil(a.now + (gate - idle))
    if a.shows_ready is None:
        return LookAtScreen()
    if not a.shows_ready:
        return WaitForScreen(max(gate, MIN_SCREEN_WAIT_S))
    return Ready()


@dataclass(frozen=True, slots=True)
class Watch:
    """Watch the screen for `wait` seconds for the effect of the last Enter."""

    wait: float


@dataclass(frozen=True, slots=True)
class Done:
    """The Enter took effect (or the session ended), or no check is configured."""


@dataclass(frozen=True, slots=True)
class RetryEnter:
    """The screen stayed the same: press Enter again (this is retry `attempt`)."""

    attempt: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Every retry spent: stop pressing Enter. The line stays where it was typed."""


_End = TypeVar("_End", Done, GiveUp)  # what finishes a check


# Times Enter is pressed again when the screen does not change (hello's
# reactor.enter_retries): enough to get past an agent that drops a keystroke while busy.
ENTER_RETRIES = 3


class EnterCheck:
    """The Enter-and-retry rule of one wake, after its line was pasted and its first
    Enter pressed: `first()`, then `seen()` after each Watch and `retried()` after
    each RetryEnter, until Done or GiveUp. Each Watch after a retry is twice as long
    as the one before; the last retry is not watched."""

    def __init__(self, retries: int, first_wait: float):
        if retries < 0 or first_wait < 0:
            raise ValueError("retries and first_wait must not be negative")
        self.retries = retries
        self.attempt = 0
        self.wait = first_wait
        self.finished = False

    def first(self) -> Watch | Done:
        if self.retries == 0:
            return self._finish(Done())
        return Watch(self.wait)

    def seen(self, *, changed: bool, ended: bool = False) -> Done | RetryEnter:
        self._check_open()
        if changed or ended:
            return self._finish(Done())
        self.attempt += 1
        return RetryEnter(self.attempt)

    def retried(self) -> Watch | GiveUp:
        self._check_open()
        if self.attempt >= self.retries:
            return self._finish(GiveUp())
        self.wait *= 2
        return Watch(self.wait)

    def _finish(self, action: _End) -> _End:
        self.finished = True
        return action

    def _check_open(self) -> None:
        if self.finished:
            raise RuntimeError("the Enter check is already finished")


# The line a wake types: an agent reads it as a prompt; a shell at its prompt would run
# it as a command, so an interactive shell gets it in a form it ignores (docs/cli.md's
# table). The session's argv decides; nothing is asked of the process.


# Shells whose interactive prompt takes `#` as the start of a comment.
COMMENT_SHELLS = frozenset(("bash", "sh", "dash", "ash", "ksh", "mksh", "fish", "busybox"))
SHELLS = COMMENT_SHELLS | {"zsh"}


def wake_line(sender: str, path: str) -> str:
    return f"You have mail from {strip(sender)}: {strip(path)}"


def digest_line(n: int) -> str:
    s = "" if n == 1 else "s"
    return f"You have {n} unread message{s}: run bench mail list to see them"


def shell_of(argv: list[str]) -> str | None:
    """The shell's name when `argv` starts an interactive shell (`bash`, `/bin/zsh -l`,
    `bash -i`), else None: an agent, or a shell running a command (`bash -c ...`) or a
    script (`sh run.sh`), whose input is not a prompt."""
    if not argv:
        return None
    name = argv[0].rsplit("/", 1)[-1].lstrip("-")  # -bash: a login shell's argv[0]
    if name not in SHELLS:
        return None
    for arg in argv[1:]:
        if arg in ("-i", "--interactive"):
            return name
        if arg == "--command" or (arg.startswith("-") and not arg.startswith("--") and "c" in arg):
            return None  # -c, -lc: a command string
        if not arg.startswith("-"):
            return None  # a script
    return name


def for_shell(line: str, shell: str | None) -> str:
    """`line` as `shell` will ignore it (unchanged for an agent: shell None)."""
    if shell is None:
        return line
    if shell in COMMENT_SHELLS:
        return "# " + line
    return ": '" + line.replace("'", "'\\''") + "'"


# Ready patterns run in RE2, in time linear in the text, so no pattern can hold the event
# loop (Python's `re` backtracks: `(a+)+$` against 27 `a`s and a `!` takes seconds).
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
