"""bench_wire.clientproto: the client protocol fed bytes, with no socket.

Frames split anywhere, several in one chunk, error frames (a request's and the
connection's), streams up to their end frame, answers matched by id, overlong and
undecodable lines, the close; with both codecs (plain dicts and msgspec Structs).
"""

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench_wire import messages as m
from bench_wire.client import JSON
from bench_wire.clientproto import CLOSED, NEED_DATA, Answer, ClientProtocol
from bench_wire.errors import WireError
from bench_wire.messages import StructCodec


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def ok(rid, kind="hello", **fields) -> bytes:
    return line({"id": rid, "ok": True, "type": kind, **fields})


def error(rid, code, message="", **fields) -> bytes:
    body = {"code": code, "message": message, **fields}
    return line({"id": rid, "ok": False, "type": "error", "error": body})


def events(proto: ClientProtocol) -> list:
    """Every event available now, up to and including NEED_DATA or CLOSED."""
    out = []
    while True:
        ev = proto.next_event()
        out.append(ev)
        if not isinstance(ev, Answer):
            return out


# ---------------------------------------------------------------- framing requests


def test_requests_get_ids_in_order_and_one_line_each():
    p = ClientProtocol(JSON)
    rid1, b1 = p.send({"verb": "hello"})
    rid2, b2 = p.send({"verb": "mail/list", "limit": 3})
    assert (rid1, rid2) == (1, 2)
    assert b1 == b'{"verb":"hello","id":1}\n'
    assert json.loads(b2) == {"verb": "mail/list", "limit": 3, "id": 2}
    assert p.waiting(1) and p.waiting(2)


def test_a_request_keeps_an_id_of_its_own_and_the_callers_dict_is_untouched():
    p = ClientProtocol(JSON)
    req = {"verb": "hello"}
    p.send(req)
    assert req == {"verb": "hello"}
    rid, data = p.send({"verb": "hello", "id": "mine"})
    assert rid == "mine" and json.loads(data)["id"] == "mine"


def test_untracked_requests_wait_for_nothing():
    p = ClientProtocol(JSON)
    rid, _ = p.send({"verb": "session/input", "data": ""}, track=False)
    assert not p.waiting(rid)


# ---------------------------------------------------------------- bytes in


def test_nothing_yet_is_need_data():
    p = ClientProtocol(JSON)
    assert p.next_event() is NEED_DATA
    assert not p.has_event()


@given(cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_answers_split_anywhere_come_out_whole_and_in_order(cuts):
    p = ClientProtocol(JSON)
    for _ in range(3):
        p.send({"verb": "hello"})
    stream = ok(1, n="é" * 5) + ok(2) + error(3, "bad-handle", "nope")
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    got: list = []
    for a, b in zip(points, points[1:], strict=False):
        p.receive_data(stream[a:b])
        got += [e for e in events(p) if isinstance(e, Answer)]
    assert [a.id for a in got] == [1, 2, 3]
    assert got[0].frame["n"] == "é" * 5 and got[0].result() is got[0].frame
    assert got[2].error is not None and got[2].error.code == "bad-handle"
    assert all(a.done for a in got)
    assert not any(p.waiting(r) for r in (1, 2, 3))


def test_several_frames_in_one_chunk_and_a_partial_tail():
    p = ClientProtocol(JSON)
    p.send({"verb": "hello"})
    p.send({"verb": "hello"})
    tail = ok(3)
    p.receive_data(ok(1) + ok(2) + tail[:5])
    assert p.has_event()
    evs = events(p)
    assert [e.id for e in evs[:2]] == [1, 2] and evs[2] is NEED_DATA
    p.receive_data(tail[5:])
    (three, need) = events(p)
    assert three.id == 3 and need is NEED_DATA


def test_an_error_frame_is_a_wire_error_with_its_parts():
    p = ClientProtocol(JSON)
    p.send({"verb": "mail/send"})
    p.receive_data(error(1, "rate-limited", "slow down", retry_after=1.5))
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.done
    with pytest.raises(WireError) as info:
        answer.result()
    err = info.value
    assert (err.code, err.message, err.retry_after) == ("rate-limited", "slow down", 1.5)


def test_an_error_without_a_message_says_the_catalogue_sentence():
    p = ClientProtocol(JSON)
    p.send({"verb": "hello"})
    p.receive_data(line({"id": 1, "ok": False, "type": "error", "error": {"code": "no-unread"}}))
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.error is not None
    assert answer.error.message == "The mailbox has no unread message."


def test_the_connections_own_error_ends_every_waiting_request():
    p = ClientProtocol(JSON)
    p.send({"verb": "hello"})
    p.send({"verb": "events", "follow": True}, stream=True)
    p.receive_data(error(None, "too-many-connections", "full"))
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.id is None and answer.done
    assert answer.error is not None and answer.error.code == "too-many-connections"
    assert not p.waiting(1) and not p.waiting(2)


# ---------------------------------------------------------------- streams


def test_a_stream_runs_to_its_end_frame():
    p = ClientProtocol(JSON)
    rid, _ = p.send({"verb": "events"}, stream=True)
    p.receive_data(ok(rid, "event", event={"seq": 1}) + ok(rid, "event", event={"seq": 2}))
    first, second, need = events(p)
    assert not first.done and not second.done and need is NEED_DATA
    assert p.waiting(rid)
    p.receive_data(ok(rid, "end", reason="done"))
    end = p.next_event()
    assert isinstance(end, Answer) and end.done and end.frame["type"] == "end"
    assert not p.waiting(rid)


def test_a_stream_ends_at_an_error_frame():
    p = ClientProtocol(JSON)
    rid, _ = p.send({"verb": "session/tail", "handle": "x"}, stream=True)
    p.receive_data(ok(rid, "output", data="") + error(rid, "no-such-session", "gone"))
    out, err, _ = events(p)
    assert not out.done and err.done and err.error.code == "no-such-session"
    assert not p.waiting(rid)


def test_answers_are_matched_by_id_not_by_order():
    p = ClientProtocol(JSON)
    s, _ = p.send({"verb": "session/attach"}, stream=True)
    c, _ = p.send({"verb": "hello"})
    p.receive_data(ok(c) + ok(s, "output", data="") + ok(s, "end"))
    hello, out, end, _ = events(p)
    assert (hello.id, hello.done) == (c, True)
    assert (out.id, out.done) == (s, False)
    assert (end.id, end.done) == (s, True)


def test_an_answer_to_a_forgotten_request_is_no_ones():
    p = ClientProtocol(JSON)
    rid, _ = p.send({"verb": "events"}, stream=True)
    p.forget(rid)  # its caller was cancelled
    p.receive_data(ok(rid, "event", event={}))
    late = p.next_event()
    assert isinstance(late, Answer) and late.id == rid and late.done
    assert not p.waiting(rid)


# ---------------------------------------------------------------- bad lines, the close


@pytest.mark.parametrize(
    "data, says",
    [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "not an object"),
        (b'{"a": 1} x\n', "not JSON"),
        (b"\xff\xfe\n", "not JSON"),
        (b"\n", "not JSON"),
    ],
)
def test_a_line_that_does_not_decode_is_a_protocol_error_and_the_next_goes_on(data, says):
    p = ClientProtocol(JSON)
    p.send({"verb": "hello"})
    p.receive_data(data + ok(1))
    with pytest.raises(WireError) as info:
        p.next_event()
    assert info.value.code == "protocol" and says in info.value.message
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.id == 1


def test_an_overlong_answer_breaks_the_connection_after_the_whole_ones():
    p = ClientProtocol(JSON, max_line=64)
    p.send({"verb": "hello"})
    p.send({"verb": "hello"})
    p.receive_data(ok(1) + b'{"id": 2, "pad": "' + b"x" * 100)
    assert p.has_event()
    first = p.next_event()
    assert isinstance(first, Answer) and first.id == 1
    for _ in range(2):  # for good: nothing after the overlong line can be framed
        with pytest.raises(WireError) as info:
            p.next_event()
        assert info.value.code == "protocol" and "longer than 64 bytes" in info.value.message
    p.receive_data(b'"}\n' + ok(3))
    with pytest.raises(WireError):
        p.next_event()


def test_an_overlong_line_with_its_newline_in_the_same_chunk():
    p = ClientProtocol(JSON, max_line=16)
    p.receive_data(b"x" * 40 + b"\n")
    with pytest.raises(WireError, match="longer than 16"):
        p.next_event()


def test_an_answer_of_exactly_the_cap_is_taken():
    frame = ok(1)
    p = ClientProtocol(JSON, max_line=len(frame) - 1)
    p.send({"verb": "hello"})
    p.receive_data(frame)
    assert isinstance(p.next_event(), Answer)


def test_the_close_comes_after_every_answer_already_received():
    p = ClientProtocol(JSON)
    p.send({"verb": "hello"})
    p.receive_data(error(None, "idle-timeout", "bye"))
    p.receive_data(b"")
    assert p.has_event()
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.error.code == "idle-timeout"
    assert p.next_event() is CLOSED
    assert p.next_event() is CLOSED


def test_a_close_mid_answer_is_closed():
    p = ClientProtocol(JSON)
    p.receive_data(ok(1)[:7])
    p.receive_data(b"")
    assert p.next_event() is CLOSED


# ---------------------------------------------------------------- typed codec


def test_struct_codec_frames_structs_and_decodes_responses():
    p = ClientProtocol(StructCodec())
    req = m.MailList(handle="bob")
    rid, data = p.send(req)
    assert req.id is None  # the caller's Struct is not changed
    assert msgspec.json.decode(data) == {"verb": "mail/list", "id": rid, "handle": "bob"}
    assert data.endswith(b"\n")
    ans = m.ListOk(id=rid, handle="bob", total=0, cap=50, truncated=False, messages=[])
    p.receive_data(msgspec.json.encode(ans) + b"\n")
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.done and answer.result() == ans


def test_struct_codec_streams_and_errors():
    p = ClientProtocol(StructCodec())
    rid, _ = p.send(m.EventsRead(follow=True), stream=True)
    frames = [
        m.EventFrame(id=rid, event={"seq": 1}),
        m.EndFrame(id=rid),
        m.ErrorResponse(id=None, error=m.ErrorBody("shutting-down", "bye")),
    ]
    p.receive_data(b"".join(msgspec.json.encode(f) + b"\n" for f in frames))
    event, end, down, _ = events(p)
    assert not event.done and end.done and isinstance(end.frame, m.EndFrame)
    assert down.error is not None and down.error.code == "shutting-down"


def test_struct_codec_refuses_what_is_no_response():
    p = ClientProtocol(StructCodec())
    p.receive_data(b'{"id": 1, "type": "no-such-type"}\n')
    with pytest.raises(WireError) as info:
        p.next_event()
    assert info.value.code == "protocol" and "did not decode" in info.value.message


# ---------------------------------------------------------------- each request's own answer


def test_every_request_names_answer_types_that_decode():
    # The type parameter of each request is its answer; a plain answer's tag is the verb.
    streams_or_untyped = {
        m.EventsRead,
        m.SessionTail,
        m.SessionScreen,
        m.SessionAttach,
        m.SessionInput,
        m.SessionResize,
        m.SessionDetach,
    }
    for req, answers in m.ANSWERS.items():
        assert answers and all(issubclass(a, m.Response) for a in answers), req
        if req not in streams_or_untyped:
            (answer,) = answers
            assert answer.__struct_config__.tag == req.__struct_config__.tag, req
        assert set(answers) <= set(m.RESPONSE_TYPES) | {m.Response}, req


def test_a_typed_answer_of_another_type_is_a_protocol_error():
    p = ClientProtocol(StructCodec())
    rid, _ = p.send(m.Hello())
    # A well-formed answer, but to another verb: never handed out as a HelloOk.
    wrong = m.ListOk(id=rid, handle="bob", total=0, cap=50, truncated=False, messages=[])
    p.receive_data(msgspec.json.encode(wrong) + b"\n")
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.done
    with pytest.raises(WireError) as info:
        answer.result()
    assert info.value.code == "protocol" and "mail/list" in info.value.message
    assert not p.waiting(rid)


def test_a_plain_request_answered_with_an_end_frame_is_a_protocol_error():
    p = ClientProtocol(StructCodec())
    rid, _ = p.send(m.SessionList())
    p.receive_data(msgspec.json.encode(m.EndFrame(id=rid)) + b"\n")
    answer = p.next_event()
    assert isinstance(answer, Answer) and answer.error is not None and answer.done


def test_streams_are_known_by_verb_for_both_codecs():
    for codec, req in ((JSON, {"verb": "events"}), (StructCodec(), m.EventsRead())):
        p = ClientProtocol(codec)
        rid, _ = p.send(req)
        p.receive_data(line({"id": rid, "ok": True, "type": "event", "event": {"seq": 1}}))
        first = p.next_event()
        assert isinstance(first, Answer) and not first.done and p.waiting(rid)
        p.receive_data(line({"id": rid, "ok": True, "type": "end", "reason": "done"}))
        end = p.next_event()
        assert isinstance(end, Answer) and end.done and not p.waiting(rid)


def test_belongs_is_the_one_matching_rule():
    p = ClientProtocol(JSON)
    rid, _ = p.send({"verb": "hello"})
    p.receive_data(ok(rid + 7) + ok(rid) + error(None, "idle-timeout", "bye"))
    other, own, conn_error = events(p)[:3]
    assert not other.belongs(rid) and own.belongs(rid) and conn_error.belongs(rid)


def test_the_struct_codec_adds_the_token_to_requests_without_one():
    codec = StructCodec(token="tok")
    _, data = codec.encode(m.Hello(), 1)
    assert msgspec.json.decode(data) == {"verb": "hello", "id": 1, "token": "tok"}
    _, data = codec.encode(m.Hello(id=5, token="own"), 2)
    assert msgspec.json.decode(data) == {"verb": "hello", "id": 5, "token": "own"}
    _, data = StructCodec().encode(m.Hello(), 3)
    assert msgspec.json.decode(data) == {"verb": "hello", "id": 3}
