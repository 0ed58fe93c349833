"""bench_wire.messages: the line buffer, the request decoder's error codes, request ids."""

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench_wire import messages as m
from bench_wire.clientproto import FrameTooLong, LineBuffer
from bench_wire.errors import CODES, WireError
from bench_wire.messages import decode_request, encode_line, request_id_of

# ---------------------------------------------------------------- LineBuffer


def test_linebuffer_splits_lines_and_keeps_the_rest():
    buf = LineBuffer(100)
    assert buf.feed(b"a\nbb\nccc") == [b"a", b"bb"]
    assert buf.feed(b"c\n\nd\n") == [b"cccc", b"", b"d"]  # the rest was kept
    assert buf.feed(b"\n") == [b""]  # and nothing is left over


def test_linebuffer_empty_feed_and_no_newline():
    buf = LineBuffer(10)
    assert buf.feed(b"") == []
    assert buf.feed(b"abc") == []
    assert buf.feed(b"") == []
    assert buf.feed(b"\n") == [b"abc"]


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_linebuffer_chunks_split_anywhere(lines, cuts):
    stream = b"".join(line + b"\n" for line in lines)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    buf = LineBuffer(64)
    got: list[bytes] = []
    for a, b in zip(points, points[1:], strict=False):
        got.extend(buf.feed(stream[a:b]))
    assert got == lines
    assert buf.feed(b"\n") == [b""]  # nothing left over


def test_linebuffer_exact_cap_is_accepted():
    cap = 16
    buf = LineBuffer(cap)
    assert buf.feed(b"x" * cap) == []  # an unfinished line of exactly the cap is held
    assert buf.feed(b"\n") == [b"x" * cap]
    buf = LineBuffer(cap)
    assert buf.feed(b"y" * cap + b"\n") == [b"y" * cap]


def test_linebuffer_cap_plus_one_raises_complete_line():
    buf = LineBuffer(16)
    with pytest.raises(FrameTooLong):
        buf.feed(b"x" * 17 + b"\n")


def test_linebuffer_cap_plus_one_raises_unfinished_line():
    buf = LineBuffer(16)
    assert buf.feed(b"x" * 10) == []
    with pytest.raises(FrameTooLong):
        buf.feed(b"x" * 7)  # 17 bytes pending, no newline yet


def test_linebuffer_cap_plus_one_after_good_lines_in_same_chunk():
    buf = LineBuffer(4)
    with pytest.raises(FrameTooLong):
        buf.feed(b"ok\n" + b"z" * 5 + b"\n")


def test_linebuffer_cap_counts_each_line_separately():
    buf = LineBuffer(4)
    assert buf.feed(b"aaaa\nbbbb\ncccc\n") == [b"aaaa", b"bbbb", b"cccc"]


# ---------------------------------------------------------------- decode_request


def code_of(line: bytes) -> str:
    with pytest.raises(WireError) as info:
        decode_request(line)
    assert info.value.code in CODES
    assert info.value.message  # a human sentence, never empty
    return info.value.code


def test_decode_good_requests():
    assert decode_request(b'{"verb":"hello"}') == m.Hello()
    assert decode_request(b'{"verb":"hello","id":7}') == m.Hello(id=7)
    assert decode_request(b'{"verb":"hello","id":"abc"}') == m.Hello(id="abc")
    req = decode_request(b'{"verb":"mail/send","to":"bob","body":"hi","id":1}')
    assert isinstance(req, m.MailSend)
    assert (req.to, req.body, req.subject, req.key, req.reply_to) == ("bob", "hi", "", None, [])
    req = decode_request(b'{"verb":"mail/list","state":"all","limit":5}')
    assert isinstance(req, m.MailList) and req.state == "all" and req.limit == 5


@pytest.mark.parametrize(
    "line",
    [
        b"{",
        b"not json",
        b'{"verb":"hello"',
        b'{"verb":"hello"} x',
        b'{"verb":"hello"}{}',
        b"{'verb':'hello'}",
        b'{"verb":hello}',
        b"",
    ],
)
def test_decode_bad_json(line):
    assert code_of(line) == "bad-json"


@pytest.mark.parametrize(
    "line",
    [
        b'{"verb":"hello\xff"}',
        b"\xff\xfe",
        b'{"verb":"mail/send","to":"b","body":"\xc3"}',
        b"\x80{}",
    ],
)
def test_decode_bad_utf8(line):
    assert code_of(line) == "bad-utf8"


@pytest.mark.parametrize(
    "line", [b"[]", b'[{"verb":"hello"}]', b"3", b'"hello"', b"null", b"true", b"1.5"]
)
def test_decode_not_object(line):
    assert code_of(line) == "not-object"


@pytest.mark.parametrize(
    "line",
    [b'{"verb":"nope"}', b'{"verb":"Hello"}', b'{"verb":""}', b'{"verb":"mail/delete","id":1}'],
)
def test_decode_unknown_verb(line):
    assert code_of(line) == "unknown-verb"


def test_decode_non_string_verb_is_refused_precisely():
    assert code_of(b'{"verb":3}') in ("unknown-verb", "bad-request")
    assert code_of(b'{"verb":["hello"]}') in ("unknown-verb", "bad-request")


@pytest.mark.parametrize(
    "line",
    [
        b"{}",
        b'{"id":1}',
        b'{"verb":null}',
        b'{"verb":"mail/send"}',  # missing to
        b'{"verb":"mail/send","to":3}',
        b'{"verb":"mail/send","to":"b","body":7}',
        b'{"verb":"mail/send","to":"b","reply_to":"c"}',
        b'{"verb":"mail/list","limit":"x"}',
        b'{"verb":"mail/list","state":"bogus"}',
        b'{"verb":"mail/read","mail_id":5}',
        b'{"verb":"events","since":"a"}',
        b'{"verb":"events","follow":"yes"}',
        b'{"verb":"hello","id":[1]}',
        b'{"verb":"hello","id":1.5}',
        b'{"verb":"job/report"}',
        b'{"verb":"session/spawn","argv":"ls"}',
    ],
)
def test_decode_bad_request(line):
    assert code_of(line) == "bad-request"


def test_bad_request_message_names_the_field():
    with pytest.raises(WireError) as info:
        decode_request(b'{"verb":"mail/send","to":3}')
    assert "to" in info.value.message


# ---------------------------------------------------------------- request_id_of


@pytest.mark.parametrize(
    "line, rid",
    [
        (b'{"verb":"nope","id":7}', 7),
        (b'{"verb":"nope","id":"x-1"}', "x-1"),
        (b'{"verb":"mail/send","id":3}', 3),
        (b'{"id":0}', 0),
        (b'{"id":-4}', -4),
        (b'{"id":true}', None),
        (b'{"id":null}', None),
        (b'{"id":[1]}', None),
        (b'{"id":{"a":1}}', None),
        (b'{"id":1.5}', None),
        (b"[1]", None),
        (b"{", None),
        (b'{"id":1\xff}', None),
        (b'{"id":123456789012345678901234567890}', None),
    ],
)
def test_request_id_of(line, rid):
    got = request_id_of(line)
    assert got == rid and type(got) is type(rid)


# ---------------------------------------------------------------- properties


@settings(max_examples=400)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_wire_error(data):
    try:
        decode_request(data)
    except WireError as err:
        assert err.code in CODES
    request_id_of(data)  # never raises


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(max_examples=400)
@given(
    verb=st.sampled_from([*m.VERBS, "nope", ""]) | st.text(max_size=12),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "id",
                "to",
                "body",
                "subject",
                "limit",
                "state",
                "mail_id",
                "since",
                "follow",
                "argv",
                "handle",
                "content",
                "reply_to",
                "key",
            ]
        ),
        json_values,
        max_size=5,
    ),
)
def test_random_objects_decode_or_raise_wire_error(verb, fields):
    line = msgspec.json.encode({"verb": verb, **fields})
    try:
        req = decode_request(line)
    except WireError as err:
        assert err.code in ("unknown-verb", "bad-request"), err
    else:
        assert isinstance(req, m.Request)
        assert req.__struct_config__.tag == verb


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
handles = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)
ids = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | text

requests = st.one_of(
    st.builds(m.Hello, id=ids),
    st.builds(m.Stop, id=ids),
    st.builds(
        m.MailSend,
        id=ids,
        to=handles,
        body=text,
        subject=text,
        key=st.none() | text,
        reply_to=st.lists(handles, max_size=3),
        in_reply_to=st.none() | text,
        token=st.none() | text,
    ),
    st.builds(
        m.MailList,
        id=ids,
        handle=st.none() | handles,
        state=st.sampled_from(["unread", "read", "all"]),
        limit=st.none() | st.integers(-5, 1000),
        cursor=st.none() | text,
    ),
    st.builds(m.MailRead, id=ids, handle=st.none() | handles, mail_id=st.none() | text),
    st.builds(
        m.EventsRead,
        id=ids,
        since=st.integers(0, 2**40),
        kind=st.none() | text,
        follow=st.booleans(),
        limit=st.none() | st.integers(1, 100),
    ),
    st.builds(m.JobReport, id=ids, content=text, token=st.none() | text),
    st.builds(m.SessionType, id=ids, handle=handles, text=text, enter=st.booleans()),
    st.builds(m.SessionKill, id=ids, handle=handles, cancel=st.booleans()),
    st.builds(
        m.Spawn,
        id=ids,
        argv=st.lists(text, min_size=1, max_size=3),
        name=st.none() | handles,
        env=st.dictionaries(text, text, max_size=2),
        rows=st.integers(1, 200),
        cols=st.integers(1, 400),
    ),
)


@settings(max_examples=300)
@given(requests)
def test_any_encoded_request_round_trips(req):
    line = encode_line(req)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = decode_request(line[:-1])
    assert type(back) is type(req)
    assert back == req
