"""How answers are printed: human text by default, the daemon's JSON with --json.

No click here: the hot commands (mail send/list/read, report) print through this module
without loading click.
"""

import sys

from bench_wire.errors import WireError, exit_code_for
from bench_wire.lean import dumps


def emit_json(obj: dict) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def fail(err: WireError, as_json: bool) -> int:
    """Print an error (stderr, or JSON on stdout) and return the exit code."""
    if as_json:
        emit_json({"ok": False, "error": {"code": err.code, "message": err.message}})
    else:
        msg = visible(err.message) if sys.stderr.isatty() else err.message
        sys.stderr.write(f"bench: {msg} [{err.code}]\n")
    return exit_code_for(err.code)


def answer(a: dict, as_json: bool, text: str) -> None:
    """The daemon's answer as JSON, or the human text."""
    if as_json:
        emit_json(a)
    else:
        write(text)


def sent(a: dict) -> str:
    if a.get("duplicate"):
        return f"already sent as {a['mail_id']} to {a['to']} (same key): {a['path']}"
    tail = "" if a.get("live") else "  (no live session: it waits in the inbox)"
    return f"sent {a['mail_id']} to {a['to']}: {a['path']}{tail}"


def listing(a: dict, state: str) -> str:
    msgs = a.get("messages") or []
    if not msgs:
        return f"no {state if state != 'all' else ''} mail for {a['handle']}".replace("  ", " ")
    rows = []
    for msg in msgs:
        rows.append(
            f"{msg['mail_id']}  {msg['state']:<6}  {msg['from']:<16}  "
            f"{msg['size']:>7}  {msg['subject']}"
        )
    shown = len(msgs)
    foot = f"{shown} of {a['total']} {state} for {a['handle']}"
    if a.get("truncated"):
        foot += f"; more: bench mail list --cursor {a['cursor']}"
    return "\n".join(rows + [foot])


def message(a: dict) -> str:
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
    return "\n".join(head) + "\n\n" + a["body"]


_VISIBLE: dict | None = None


def visible(text: str) -> str:
    """Control characters (C0 but tab and newline, DEL, C1) shown as \\xNN / \\uNNNN:
    on a terminal, a body's escape sequences could otherwise move the cursor, rewrite
    the header lines above it, or set the window title."""
    global _VISIBLE
    if _VISIBLE is None:
        _VISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c not in (9, 10)}
        _VISIBLE.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})
    return text.translate(_VISIBLE)


def write(text: str) -> None:
    """Human output; escaped when stdout is a terminal (see `visible`). Raw `tail` output
    and --json do not come through here."""
    out = sys.stdout
    if out.isatty():
        text = visible(text)
    out.write(text)
    if not text.endswith("\n"):
        out.write("\n")
    out.flush()
