"""The blocking shell's typed client against a real daemon: `call` answers with the
request's own type, `stream` yields a stream's frames and ends cleanly at its end frame
(the connection stays usable), and a refused stream raises at once."""

import pytest

from bench_wire import messages as m
from bench_wire.client import Client
from bench_wire.errors import WireError
from bench_wire.messages import StructCodec


def typed(bench_dir: str) -> Client:
    return Client(bench_dir, codec=StructCodec())


def test_call_answers_with_the_requests_own_type(daemon):
    with typed(daemon.dir) as conn:
        hello = conn.call(m.Hello())
        listed = conn.call(m.SessionList())
    assert isinstance(hello, m.HelloOk) and hello.caller == "operator"
    assert hello.last_seq >= 1  # daemon/started at least
    assert isinstance(listed, m.SessionListOk) and listed.sessions == []


def test_a_stream_ends_at_its_end_frame_and_the_connection_goes_on(daemon):
    daemon.ok("mail", "send", "bob", "-m", "hi")
    with typed(daemon.dir) as conn:
        last = conn.call(m.Hello()).last_seq
        frames = conn.stream(m.EventsRead())
        events = [f.event for f in frames]
        assert frames.end is not None and frames.end.reason == "done"
        assert list(frames) == []  # ended: iterating again gives nothing
        # The same connection answers the next request: nothing of the stream is left.
        again = conn.call(m.Hello())
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "daemon/started" and "mail/sent" in kinds
    assert events[-1]["seq"] == last and again.last_seq >= last


def test_events_since_the_hellos_last_seq_are_the_newer_ones(daemon):
    with typed(daemon.dir) as conn:
        last = conn.call(m.Hello()).last_seq
    daemon.ok("mail", "send", "bob", "-m", "after")
    with typed(daemon.dir) as conn:
        newer = [f.event for f in conn.stream(m.EventsRead(since=last))]
    assert newer and all(e["seq"] > last for e in newer)
    assert any(e["kind"] == "mail/sent" for e in newer)


def test_a_refused_stream_raises_at_its_first_frame(daemon):
    with typed(daemon.dir) as conn:
        frames = conn.stream(m.SessionTail(handle="nobody"))
        with pytest.raises(WireError) as info:
            next(frames)
        assert info.value.code == "no-such-session"
        assert conn.call(m.Hello()).caller == "operator"


def test_the_plain_codec_streams_too(daemon):
    with Client(daemon.dir) as conn:
        frames = conn.stream({"verb": "events", "limit": 1})
        (frame,) = list(frames)
    assert frame["type"] == "event" and frame["event"]["seq"] == 1
    assert frames.end["type"] == "end"
