"""The mail file format: YAML front matter, a blank line, then the body byte for byte.

    ---
    id: "20261130T045611.123Z-0001"
    from: "operator"
    to: "alice"
    subject: "number: 100"
    date: "2026-11-30T04:56:11.123Z"
    key: "k-..."
    reply-to: ["bob"]
    in-reply-to: "..."
    ---

    body...

Every string is written as a YAML double-quoted scalar, so any subject parses with a
standard YAML parser whatever it holds (colons, quotes, `---`). Subjects are one line
without control characters (refused at send). Characters YAML may not hold literally
(C1 controls, U+FEFF, U+FFFE/U+FFFF) are written as \\u escapes. Pure: no I/O.
"""

import json
import re
from json.encoder import encode_basestring  # json.dumps' C string encoder, without dumps' overhead
from typing import Any

FIELDS = ("id", "from", "to", "subject", "date", "key", "reply-to", "in-reply-to")


def _yaml_printable(ch: str) -> bool:
    c = ord(ch)
    return (
        c in (0x09, 0x0A, 0x0D)
        or 0x20 <= c <= 0x7E
        or c == 0x85
        or 0xA0 <= c <= 0xD7FF
        or (0xE000 <= c <= 0xFFFD and c != 0xFEFF)
        or 0x10000 <= c <= 0x10FFFF
    )


# What YAML may not hold literally (the complement of _yaml_printable), found in one C
# scan: quote() runs for every field of every message sent.
_NOT_YAML_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def quote(value: str) -> str:
    """A YAML double-quoted scalar that is also a JSON string (so we parse it back fast)."""
    out = encode_basestring(value)  # == json.dumps(value, ensure_ascii=False), faster
    if _NOT_YAML_PRINTABLE.search(out) is None:
        return out
    return "".join(ch if _yaml_printable(ch) else f"\\u{ord(ch):04x}" for ch in out)


def render(meta: dict[str, Any], body: bytes) -> bytes:
    """The file's bytes. `meta` holds FIELDS (reply-to a list, in-reply-to optional)."""
    lines = ["---"]
    for name in FIELDS:
        value = meta.get(name)
        if value is None or (name == "reply-to" and not value):
            continue
        if isinstance(value, list):
            lines.append(f"{name}: [" + ", ".join(quote(v) for v in value) + "]")
        else:
            lines.append(f"{name}: {quote(str(value))}")
    lines.append("---")
    lines.append("")
    return ("\n".join(lines) + "\n").encode("utf-8") + body


class BadMailFile(ValueError):
    pass


def parse(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(meta, body) of a file `render` wrote; BadMailFile if it is not one."""
    if not data.startswith(b"---\n"):
        raise BadMailFile("no front matter")
    end = data.find(b"\n---\n\n", 3)
    if end < 0:
        raise BadMailFile("front matter is not closed")
    meta: dict[str, Any] = {}
    for line in data[4:end].decode("utf-8").split("\n"):
        name, sep, raw = line.partition(": ")
        if not sep or name not in FIELDS:
            raise BadMailFile(f"unexpected front matter line {line!r}")
        try:
            meta[name] = json.loads(raw)
        except ValueError as err:
            raise BadMailFile(f"bad value for {name}: {err}") from None
    for required in ("id", "from", "to", "date", "key"):
        if required not in meta:
            raise BadMailFile(f"missing {required}")
    meta.setdefault("subject", "")
    return meta, data[end + 6 :]


def check_subject(subject: str) -> str | None:
    """Why a subject is refused, or None when it is fine."""
    for ch in subject:
        c = ord(ch)
        if c < 0x20 or c == 0x7F or 0x80 <= c < 0xA0 or 0xD800 <= c <= 0xDFFF:
            return f"the subject holds the control character U+{c:04X}; use one plain line"
    return None
