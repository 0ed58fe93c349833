"""The mail file format: YAML front matter, a blank line, then the body byte for byte
(docs/files.md). Every string is a YAML double-quoted scalar, so any subject parses with
a standard YAML parser; `quote` is bench's one YAML quoting function (the job core's
reply header uses it too, through `scalar`). Pure.
"""

import json
import re
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring  # json.dumps' C string encoder, without dumps' overhead
from typing import Any

import msgspec

# What YAML may not hold literally (and the line breaks NEL, LS and PS, which fold inside
# quotes), found in one C scan: quote() runs for every field of every message sent. Tab,
# CR and LF never reach it: encode_basestring has escaped them.
_NOT_YAML_PRINTABLE = re.compile(
    "[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def quote(value: str) -> str:
    """A YAML double-quoted scalar that is also a JSON string (so we parse it back fast).

    Not ASCII-escaped: YAML's \\u escapes are single UTF-16 units, so a JSON surrogate
    pair would read back as two characters; only what YAML may not hold is escaped."""
    out = encode_basestring(value)  # == json.dumps(value, ensure_ascii=False), faster
    if _NOT_YAML_PRINTABLE.search(out) is None:  # nearly always: no new string
        return out
    return _NOT_YAML_PRINTABLE.sub(_escape, out)


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
# Strings a YAML 1.1/1.2 reader may resolve to a number or a date (conservative).
_NUMBERISH = re.compile(r"[0-9][0-9a-fA-FxXoObB_.+\-]*")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def scalar(value: str) -> str:
    """`value` plain when a YAML reader takes it as that string (`child`, `s-1`), else
    `quote(value)`: a newline or `: ` cannot forge a line, `123` or `null` stays a string."""
    plain = _PLAIN.fullmatch(value) and not _NUMBERISH.fullmatch(value)
    return value if plain and value.lower() not in _YAML_WORDS else quote(value)


class BadMailFile(ValueError):
    pass


class FrontMatter(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename={"sender": "from", "reply_to": "reply-to", "in_reply_to": "in-reply-to"},
):
    """A mail file's front matter, typed, its fields in the file's order. Field names are
    the file's (`from`, `reply-to`, `in-reply-to`) but for the renames."""

    id: str
    sender: str
    to: str
    subject: str = ""
    date: str
    key: str
    reply_to: tuple[str, ...] = ()
    in_reply_to: str | None = None
    origin: str | None = None  # a copy from another node: its identity there (names)
    # Mail queued for another node: its dedup id in JetStream (drawn once, so a republish
    # after a crash reuses it).
    nonce: str | None = None

    @classmethod
    def of(cls, meta: Mapping[str, object]) -> "FrontMatter":
        """The typed front matter of a dict keyed as in the file (what `parse` returns);
        BadMailFile when a field is missing, unknown or of the wrong type."""
        try:
            return msgspec.convert(meta, cls)
        except msgspec.ValidationError as err:
            raise BadMailFile(f"bad front matter: {err}") from None

    def items(self) -> list[tuple[str, str | list[str] | None]]:
        """(name in the file, value) in FIELDS order; reply-to as a list."""
        return [
            (name, list(self.reply_to) if name == "reply-to" else getattr(self, attr))
            for name, attr in _NAMES
        ]


# Each field's name in the file and its attribute, in the file's order.
_NAMES = tuple((f.encode_name, f.name) for f in msgspec.structs.fields(FrontMatter))
FIELDS = tuple(name for name, _ in _NAMES)


def _render(items: Iterable[tuple[str, object]], body: bytes) -> bytes:
    lines = ["---"]
    for name, value in items:
        if value is None or (name == "reply-to" and not value):
            continue
        if isinstance(value, list):
            lines.append(f"{name}: [" + ", ".join(quote(v) for v in value) + "]")
        else:
            lines.append(f"{name}: {quote(str(value))}")
    lines.append("---")
    lines.append("")
    return ("\n".join(lines) + "\n").encode("utf-8") + body


def render(meta: FrontMatter | Mapping[str, Any], body: bytes) -> bytes:
    """The file's bytes. `meta` is a FrontMatter, or a dict holding FIELDS (reply-to a
    list, in-reply-to and origin optional): the same fields give the same bytes."""
    if isinstance(meta, FrontMatter):
        return _render(meta.items(), body)
    return _render(((name, meta.get(name)) for name in FIELDS), body)


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


def read(data: bytes) -> tuple[FrontMatter, bytes]:
    """(front matter, body) of a file `render` wrote, every field type-checked;
    BadMailFile if it is not one."""
    meta, body = parse(data)
    return FrontMatter.of(meta), body


def check_subject(subject: str) -> str | None:
    """Why a subject is refused, or None when it is fine."""
    for ch in subject:
        c = ord(ch)
        if c < 0x20 or c == 0x7F or 0x80 <= c < 0xA0 or 0xD800 <= c <= 0xDFFF:
            return f"the subject holds the control character U+{c:04X}; use one plain line"
    return None
