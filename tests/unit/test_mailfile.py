"""benchd.store.mailfile: a stored mail file read typed, or as the runtime's dict."""

import pytest

from bench_wire.errors import WireError
from benchd.core import frontmatter
from benchd.core.frontmatter import FrontMatter
from benchd.store import mailfile

META = {
    "id": "20261130T045611.123Z-0001",
    "from": "operator",
    "to": "alice",
    "subject": "hi",
    "date": "2026-11-30T04:56:11.123Z",
    "key": "k-1",
    "in-reply-to": "20261130T045611.123Z-0000",
}


def test_read_gives_the_front_matter_typed_and_whole():
    data = frontmatter.render(META, b"body")
    meta, body = mailfile.read("/m/x.md", data)
    assert isinstance(meta, FrontMatter) and body == b"body"
    assert (meta.sender, meta.in_reply_to, meta.reply_to) == ("operator", META["in-reply-to"], ())
    assert meta == FrontMatter.of(META)


def test_a_field_that_is_not_a_string_is_a_bad_mail_file():
    data = b'---\nid: "x"\nfrom: 5\nto: "a"\ndate: "d"\nkey: "k"\n---\n\n'
    with pytest.raises(WireError) as exc:
        mailfile.read("/m/x.md", data)
    assert exc.value.code == "bad-mail-file"
    assert exc.value.message == "/m/x.md: its from is not a string; it was left where it is"


def test_a_link_of_the_wrong_type_is_a_bad_mail_file():
    data = frontmatter.render(META, b"").replace(b'in-reply-to: "', b'in-reply-to: ["')
    data = data.replace(b'0000"\n', b'0000"]\n')
    with pytest.raises(WireError) as exc:
        mailfile.read("/m/x.md", data)
    assert exc.value.code == "bad-mail-file"
    assert "in-reply-to" in exc.value.message and exc.value.message.endswith("where it is")
