"""How answers are printed: human text (numbers and names in one form for the CLI and
the dashboard), or the daemon's JSON, exact values, with --json. On the fast path: no
click here, and what the other commands need is imported where it is used."""

import sys

from bench_wire.client import dumps
from bench_wire.errors import WireError, exit_code_for

# The fast path imports neither msgspec nor typing: the type checker's alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    import msgspec

    from bench_wire import messages as m

    Json = dict[str, Any]  # an answer as plain data (the fast path's)
    T = TypeVar("T")


def _escape(text: str) -> str:
    # Only a terminal needs it: the fast path's answers usually go to a pipe (an agent).
    from bench_wire.untrusted import escape

    return escape(text)


def emit_json(obj: "Json | msgspec.Struct") -> None:
    """An answer as one line of JSON (`--json`), plain or typed."""
    if not isinstance(obj, dict):
        import msgspec  # a typed answer: never the fast path's

        emit_json(msgspec.to_builtins(obj))
    else:
        sys.stdout.write(dumps(without_request_id(obj)) + "\n")


def without_request_id(obj: "Json") -> "Json":
    """An answer (an object with `ok` and `type`) and those inside it (a reply's `sent`)
    without the wire's request id: one request a connection, the number says nothing."""
    if "ok" not in obj or "type" not in obj:
        return obj
    out = {k: v for k, v in obj.items() if k != "id"}
    for k, v in out.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            out[k] = [without_request_id(x) if isinstance(x, dict) else x for x in v]
    return out


def fail(err: WireError, as_json: bool) -> int:
    """Print an error (stderr, or JSON on stdout) and return the exit code."""
    if as_json:
        body: Json = {"code": err.code, "message": err.message}
        if err.retry_after is not None:
            body["retry_after"] = err.retry_after
        emit_json({"ok": False, "error": body})
    else:
        msg = _escape(err.message) if sys.stderr.isatty() else err.message
        sys.stderr.write(f"bench: {msg} [{err.code}]\n")
    return exit_code_for(err.code)


def done(as_json: bool, a: "Json | msgspec.Struct", text: str) -> None:
    """The daemon's answer as JSON with --json, else the human text."""
    if as_json:
        emit_json(a)
    else:
        write(text)


def sent(a: "Json") -> str:
    if a.get("duplicate"):
        return f"already sent as {a['mail_id']} to {a['to']} (same key): {a['path']}"
    note = a.get("note") or ""
    if note.startswith("queued-for-"):
        return f"queued {a['mail_id']} for {a['to']} (node {note[11:]}): {a['path']}"
    # No session ever holds `operator`: its mail is read with bench mail list, not woken.
    quiet = a.get("live") or a.get("to") == "operator"
    tail = "" if quiet else "  (no live session: it waits in the inbox)"
    if a.get("new_mailbox"):
        tail = (
            f"  (new-mailbox: nothing was sent to {a['to']} before and no live session "
            "holds it: is the handle right? It waits in the inbox)"
        )
    if a.get("not_a_reply"):
        tail += f"  (not-a-reply: {a['not_a_reply']})"
    return f"sent {a['mail_id']} to {a['to']}: {a['path']}{tail}"


def bridge_line(b: "Json") -> str:
    """The bridge's state and the outbound queue, as `bench status` and `bench nodes` say it."""
    state = "bridge connected" if b.get("connected") else "bridge not connected"
    if b.get("seen_ms") is None:
        state = "no bridge"
    err = b.get("error")
    if err:
        state = f"bridge stopped: {err['message']} [{err['code']}]"
    return f"{state}, {b.get('queued', 0)} queued outbound"


# ---------------------------------------------------------------- numbers and names


def size(n: int) -> str:
    """A byte count as people read it: 812 B, 4.2 KiB, 1.5 MiB."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def duration(seconds: float) -> str:
    """An idle time or an age, to its largest whole unit: 42s, 10m, 2h, 3d (never
    negative)."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# Ten years: past it a duration is a typo or an attack (`1e23d` overflows a clock).
LONGEST = 3650 * 86400.0


def parse_duration(text: str, most: float = LONGEST) -> float:
    """`90s`, `10m`, `1.5h`, `2d` in seconds, at most `most`; else ValueError with a
    sentence."""
    t = text.strip()
    unit = t[-1:]
    try:
        if unit not in _UNIT_S:
            raise ValueError(t)
        value = float(t[:-1])
        if not 0 <= value < float("inf"):  # also refuses nan
            raise ValueError(t)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a duration: give a number and a unit, s m h or d (90s, 10m, 1h)"
        ) from None
    seconds = value * _UNIT_S[unit]
    if seconds > most:
        from bench_wire.config import seconds_text  # the daemon's messages use it too

        raise ValueError(f"{text!r} is out of range: at most {seconds_text(most)}")
    return seconds


def count(n: int, one: str, many: str | None = None) -> str:
    """`1 match`, `2 matches`, `0 sessions`."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def signal_name(number: int) -> str:
    """SIGHUP for 1; a number Linux does not name (or a real-time signal) as SIG<n>."""
    import signal  # loads enum: only here, never on the fast path

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def forest(
    items: "list[T]", key: "Callable[[T], str]", parent: "Callable[[T], str | None]"
) -> "list[tuple[int, T]]":
    """`items` as trees, in their order: (depth, item), each under its parent; an item
    whose parent is not among them is a root, and so is one in a cycle of parents."""
    by_key = {key(x): x for x in items}
    kids: dict[str | None, list[T]] = {}
    for x in items:
        p = parent(x)
        kids.setdefault(p if p in by_key and p != key(x) else None, []).append(x)
    out: list[tuple[int, T]] = []
    seen: set[str] = set()

    def walk(x: "T", depth: int) -> None:
        if key(x) in seen:
            return
        seen.add(key(x))
        out.append((depth, x))
        for c in kids.get(key(x), []):
            walk(c, depth + 1)

    for x in kids.get(None, []) + items:  # then what a cycle of parents left out
        walk(x, 0)
    return out


def listing(a: "Json", state: str, again: str = "") -> str:
    """A mailbox page; `again`: the options repeated in the next page's command."""
    msgs = a.get("messages") or []
    if not msgs:
        return f"no {state if state != 'all' else ''} mail for {a['handle']}".replace("  ", " ")
    width = max(4, *(len(msg["from"]) for msg in msgs))
    rows = [f"{'ID':<25}  {'STATE':<6}  {'FROM':<{width}}  {'SIZE':>9}  SUBJECT"]
    for msg in msgs:
        rows.append(
            f"{msg['mail_id']:<25}  {msg['state']:<6}  {msg['from']:<{width}}  "
            f"{size(msg['size']):>9}  {msg['subject']}"
        )
    shown, total = len(msgs), a["total"]
    # "3 unread messages for alice", "1 message for alice" (all), "5 of 12 messages ...".
    kind = ("" if state == "all" else f"{state} ") + ("message" if total == 1 else "messages")
    foot = f"{shown} of {total} {kind}" if shown != total else f"{total} {kind}"
    foot += f" for {a['handle']}"
    if a.get("truncated"):
        foot += f"; more: bench mail list{again} --cursor {a['cursor']}"
    return "\n".join(rows + [foot])


def message(a: "Json") -> str:
    head = [
        f"id:      {a['mail_id']}",
        f"from:    {a['from']}",
        f"to:      {a['to']}",
        f"subject: {a['subject']}",
        f"date:    {a['date']}",
        f"path:    {a['path']}",
    ]
    if a.get("reply_to"):
        head.append("reply-to: " + ", ".join(a["reply_to"]))
    return "\n".join(head) + "\n\n" + str(a["body"])


class Painted:
    """A span bench colours itself, apart until `write` escapes every piece and only then
    adds colour: no text from outside can produce or close one of our colours."""

    __slots__ = ("text", "fg")

    def __init__(self, text: str, fg: str):
        self.text, self.fg = text, fg


_SGR = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36}


def paint(text: str, fg: str | None, on: bool) -> "str | Painted":
    """`text` in colour `fg` when `on` (a terminal, no NO_COLOR, no --json)."""
    if not on or fg is None:
        return text
    return Painted(text, fg)


def write(text: "str | list[str | Painted]") -> None:
    """Human output, pieces of it painted: escaped and coloured only on a terminal
    (bench_wire.untrusted says why)."""
    out = sys.stdout
    tty = out.isatty()
    if isinstance(text, str):
        text = [text]
    parts: list[str] = []
    escape = _escape if tty else str
    for piece in text:
        if isinstance(piece, Painted):
            if tty:
                parts.append(f"\x1b[{_SGR[piece.fg]}m{escape(piece.text)}\x1b[0m")
            else:
                parts.append(piece.text)
        else:
            parts.append(escape(piece) if tty else piece)
    whole = "".join(parts)
    out.write(whole)
    if not whole.endswith("\n"):
        out.write("\n")
    out.flush()


# What a delivery state says besides its name and time (`bench mail status`, MCP's).
MARK_DETAILS = ("reason", "until", "by", "reader", "reply", "node")


def shown_state(handle: str, state: str) -> str:
    """A message's state as people read it: a copy for another node (in `@outbound`) is
    `queued`, then `forwarded` once JetStream has it."""
    if handle == "@outbound":
        return "forwarded" if state == "read" else "queued"
    return state


def thread_messages(a: "m.ThreadOk", head: "Callable[[m.ThreadMessage, str], str]") -> list[str]:
    """A thread's messages as text, each under `head(msg, to)` (the CLI's, or MCP's)."""
    parts = []
    for msg in a.messages:
        # `to` is the address as sent (bob@node2 for mail queued for another node).
        to = msg.to or msg.handle
        parts.append(f"{head(msg, to)}\nsubject: {msg.subject}\n\n{msg.body.rstrip()}\n")
    return parts


def thread_cut(a: "m.ThreadOk") -> str:
    """What a cut thread left out, and the commands that show it."""
    left = a.left_out
    if not a.truncated or left is None:
        return ""
    lines = [
        f"(cut: the thread has more than {a.cap} messages; shown: "
        f"{len(a.messages)} around {a.mail_id}, with the root)"
    ]
    if left.ancestors:
        n = left.ancestors
        lines.append(f"  left out: {n} earlier message{'' if n == 1 else 's'} above")
    if left.replies:
        lines.append("  left out: later replies below")
    if not left.ancestors and not left.replies:
        lines.append("  left out: messages in other branches of the thread")
    if left.above:
        lines.append(f"  see earlier: bench mail thread {left.above}")
    if left.below:
        lines.append(f"  see later:   bench mail thread {left.below}")
    return "\n".join(lines)
