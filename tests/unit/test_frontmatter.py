"""benchd.core.frontmatter: the mail file format parses with a real YAML parser, byte for byte."""

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.core import frontmatter
from benchd.core.frontmatter import BadMailFile, check_subject, parse, render

META = {
    "id": "20261130T045611.123Z-0001",
    "from": "operator",
    "to": "alice",
    "subject": "number: 100",
    "date": "2026-11-30T04:56:11.123Z",
    "key": "k-1",
}


def split(data: bytes) -> tuple[str, bytes]:
    """(the YAML between the --- fences, the body after the blank line)."""
    assert data.startswith(b"---\n")
    end = data.index(b"\n---\n\n")
    return data[4:end].decode("utf-8"), data[end + len(b"\n---\n\n") :]


def test_render_layout():
    data = render(META, b"hello\n")
    text = data.decode("utf-8")
    assert text.startswith("---\nid: ")
    assert "\n---\n\nhello\n" in text
    assert text.endswith("\n---\n\nhello\n")


def test_round_trip_and_yaml():
    body = b"line 1\n---\nline 3\n\n"
    data = render(META, body)
    meta, got = parse(data)
    assert got == body
    assert {k: meta[k] for k in META} == META
    head, rest = split(data)
    assert rest == body
    assert yaml.safe_load(head) == META


def test_yaml_gives_back_exactly_the_fields():
    meta = dict(META, **{"reply-to": ["bob", "carol"]})
    head, _ = split(render(meta, b""))
    parsed = yaml.safe_load(head)
    assert set(parsed) == {"id", "from", "to", "subject", "date", "key", "reply-to"}
    assert parsed == meta
    for k in ("id", "date", "key", "subject"):
        assert isinstance(parsed[k], str)  # quoted: never a YAML date or number


def test_empty_reply_to_and_none_are_left_out():
    meta = dict(META, **{"reply-to": [], "in-reply-to": None})
    head, _ = split(render(meta, b"x"))
    assert set(yaml.safe_load(head)) == {"id", "from", "to", "subject", "date", "key"}


def test_in_reply_to_round_trips():
    meta = dict(META, **{"in-reply-to": "20261130T045611.123Z-0000"})
    data = render(meta, b"x")
    assert yaml.safe_load(split(data)[0])["in-reply-to"] == "20261130T045611.123Z-0000"
    assert parse(data)[0]["in-reply-to"] == "20261130T045611.123Z-0000"


@pytest.mark.parametrize(
    "subject",
    [
        "",
        "a: b",
        "---",
        "--- ",
        '"quoted"',
        "'single'",
        "#not a comment",
        "- item",
        "[x]",
        "{a: b}",
        "&anchor *alias",
        "!tag",
        "% directive",
        "@at `tick`",
        "yes",
        "null",
        "~",
        "2026-11-30",
        "0x1F",
        "1e3",
        "back\\slash",
        "tab\u00a0nbsp",
        "emoji \U0001f600",
        "é ü ß",
        "\u2028line sep\u2029",
        "\ufeffbom",
        "\ufffe\uffff",
        " lead and trail ",
        "|",
        ">",
    ],
)
def test_awkward_subjects(subject):
    assert check_subject(subject) is None
    meta = dict(META, subject=subject)
    data = render(meta, b"body")
    head, body = split(data)
    assert yaml.safe_load(head) == meta
    assert parse(data) == (meta, b"body")
    assert body == b"body"


@pytest.mark.parametrize("ch", ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85", "\x9f", "\ud800"])
def test_check_subject_refuses_control_characters(ch):
    why = check_subject(f"a{ch}b")
    assert why and "control" in why


def test_parse_refuses_what_render_did_not_write():
    for data in [
        b"",
        b"hello",
        b'---\nid: "x"\n',
        b'---\nbogus: "x"\n---\n\n',
        b"---\nid: not-json\n---\n\n",
        b'---\nid: "x"\n---\n\nbody',
    ]:
        with pytest.raises(BadMailFile):
            parse(data)


# ---------------------------------------------------------------- properties

subjects = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=200).filter(
    lambda s: check_subject(s) is None
)


@settings(max_examples=500)
@given(
    subject=subjects,
    body=st.binary(max_size=300),
    reply_to=st.lists(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True), max_size=3),
)
def test_any_accepted_subject_and_body_round_trip(subject, body, reply_to):
    meta = dict(META, subject=subject, key=subject or "k")
    if reply_to:
        meta["reply-to"] = reply_to
    data = render(meta, body)
    head, rest = split(data)
    assert rest == body
    assert yaml.safe_load(head) == meta
    assert parse(data) == (meta, body)


@settings(max_examples=300)
@given(st.text(max_size=50))
def test_check_subject_matches_its_rule(s):
    bad = any(
        ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0 or 0xD800 <= ord(c) <= 0xDFFF
        for c in s
    )
    assert (check_subject(s) is not None) == bad


def test_quote_escapes_what_yaml_cannot_hold():
    for s in ["\ufeff", "\ufffe", "\uffff", "a\ufeffb"]:
        q = frontmatter.quote(s)
        assert "\ufeff" not in q and "\ufffe" not in q and "\uffff" not in q
        assert yaml.safe_load(q) == s


# The job core's reply header writes its values with `scalar` (plain or `quote`d): what
# it is given must come back the same through the front-matter parser and through YAML.
HEADER_VALUES = [
    "child",
    "s-1",
    "123",
    "0x1f",
    "null",
    "Yes",
    "a: b",
    "two\nlines",
    "tab\there",
    'say "hi"',
    "back\\slash",
    "nel\x85ls\u2028ps\u2029",
    "bom\ufeff",
    "surrogate\ud800",
    "ünïcode ✓ 😀",
    "-leading dash",
    "",
]


@pytest.mark.parametrize("value", HEADER_VALUES)
def test_job_header_values_round_trip_through_the_parser(value):
    meta = dict(META, subject="", key="k", to=value, **{"from": value})
    data = frontmatter.render(meta, b"body")
    got, body = frontmatter.parse(data)
    assert got["to"] == got["from"] == value and body == b"body"
    written = frontmatter.scalar(value)
    assert "\n" not in written and "\u2028" not in written and "\x85" not in written
    if "\ud800" not in value:  # PyYAML refuses a lone surrogate even escaped
        assert yaml.safe_load(f"v: {written}") == {"v": value}


@given(st.text(max_size=40))
def test_any_scalar_reads_back_as_the_same_string(value):
    written = frontmatter.scalar(value)
    assert "\n" not in written
    if written != value:  # quoted: a JSON string too, which is how bench reads it back
        assert json.loads(written) == value


# ---------------------------------------------------------------- the typed front matter

FULL = frontmatter.FrontMatter(
    id=META["id"],
    sender=META["from"],
    to=META["to"],
    subject=META["subject"],
    date=META["date"],
    key=META["key"],
    reply_to=("bob", "carol@node2"),
    in_reply_to="20261130T045611.123Z-0000",
    origin="20261130T045610.007Z-0003@node2",
)


def test_the_struct_renders_the_bytes_the_dict_renders():
    bare = frontmatter.FrontMatter.of(META)
    assert render(bare, b"hi\n") == render(META, b"hi\n")
    full = dict(
        META,
        **{
            "reply-to": ["bob", "carol@node2"],
            "in-reply-to": "20261130T045611.123Z-0000",
            "origin": "20261130T045610.007Z-0003@node2",
        },
    )
    assert render(FULL, b"x") == render(full, b"x")
    assert parse(render(FULL, b""))[0] == full
    assert parse(render(bare, b""))[0] == META  # no empty reply-to, no None


def test_read_gives_the_struct_back():
    for fm in (FULL, frontmatter.FrontMatter.of(META)):
        data = render(fm, b"body\n---\n")
        assert frontmatter.read(data) == (fm, b"body\n---\n")
        assert render(parse(data)[0], b"body\n---\n") == data


def test_a_file_without_a_subject_reads_with_an_empty_one():
    data = render({k: v for k, v in META.items() if k != "subject"}, b"")
    assert frontmatter.read(data)[0].subject == ""


@pytest.mark.parametrize(
    "line",
    [
        'reply-to: "bob"',  # not a list
        "reply-to: [1]",
        'in-reply-to: ["x"]',
        "origin: 5",
        "id: 7",
        "from: null",
    ],
)
def test_read_refuses_fields_of_the_wrong_type(line):
    name = line.split(":")[0]
    lines = [f"{k}: {json.dumps(v)}" for k, v in META.items() if k != name] + [line]
    data = ("---\n" + "\n".join(lines) + "\n---\n\nbody").encode()
    parse(data)  # the dict reading takes what is JSON
    with pytest.raises(BadMailFile, match="bad front matter"):
        frontmatter.read(data)


@settings(max_examples=300)
@given(
    subject=subjects,
    body=st.binary(max_size=100),
    reply_to=st.lists(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True), max_size=3),
    origin=st.none() | st.just("20261130T045610.007Z-0003@node2"),
)
def test_struct_and_dict_render_alike(subject, body, reply_to, origin):
    fm = frontmatter.FrontMatter.of(
        dict(META, subject=subject, **{"reply-to": reply_to, "origin": origin})
    )
    data = render(fm, body)
    assert data == render(parse(data)[0], body)
    assert frontmatter.read(data) == (fm, body)
