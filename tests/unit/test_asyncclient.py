"""bench_wire.asyncclient against a scripted stand-in daemon on a real Unix socket.

What the shell adds to the client protocol: answers matched by id across a cancelled
call, a stream left early closing its connection, the daemon's last words read after a
failed write, and the failures (no daemon, a close) as Disconnected. Every wait is on
an event the other side sets, never on a clock.
"""

import asyncio
import json
import os
import shutil

import msgspec
import pytest

from bench_wire.asyncclient import AsyncClient, KeptClient
from bench_wire.errors import Disconnected, WireError
from bench_wire.messages import JobReport, ReportOk, StructCodec
from tests.support.daemon import short_tmpdir


@pytest.fixture
def bench_dir():
    d = short_tmpdir("bac")  # short: AF_UNIX paths are small
    yield d
    shutil.rmtree(d)


def frame(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def run_with(bench_dir, serve, scenario):
    """Serve the socket with `serve(reader, writer)` while `scenario()` runs."""

    async def main():
        server = await asyncio.start_unix_server(serve, os.path.join(bench_dir, "benchd.sock"))
        async with server:
            return await scenario()

    return asyncio.run(main())


async def read_request(reader) -> dict:
    return json.loads(await reader.readline())


def test_calls_and_a_stream_on_one_connection(bench_dir):
    async def serve(reader, writer):
        hello = await read_request(reader)
        writer.write(frame({"id": hello["id"], "ok": True, "type": "hello", "caller": "x"}))
        events = await read_request(reader)
        for seq in (1, 2):
            writer.write(frame({"id": events["id"], "ok": True, "type": "event", "seq": seq}))
        writer.write(frame({"id": events["id"], "ok": True, "type": "end"}))
        bad = await read_request(reader)
        body = {"code": "bad-handle", "message": "no such"}
        writer.write(frame({"id": bad["id"], "ok": False, "type": "error", "error": body}))
        await writer.drain()

    async def scenario():
        async with AsyncClient(bench_dir) as c:
            hello = await c.call({"verb": "hello"})
            seqs = [f["seq"] async for f in c.stream({"verb": "events"})]
            with pytest.raises(WireError) as info:
                await c.call({"verb": "mail/list", "handle": "?"})
            return hello, seqs, info.value

    hello, seqs, err = run_with(bench_dir, serve, scenario)
    assert hello["caller"] == "x" and seqs == [1, 2]
    assert (err.code, err.message) == ("bad-handle", "no such")
    assert not isinstance(err, Disconnected)


def test_the_late_answer_of_a_cancelled_call_is_not_the_next_ones(bench_dir):
    first_in = asyncio.Event()

    async def serve(reader, writer):
        first = await read_request(reader)
        first_in.set()
        second = await read_request(reader)  # sent after the first call was cancelled
        for req in (first, second):
            writer.write(frame({"id": req["id"], "ok": True, "type": "hello", "n": req["n"]}))
        await writer.drain()

    async def scenario():
        async with AsyncClient(bench_dir) as c:
            task = asyncio.create_task(c.call({"verb": "hello", "n": 1}))
            await first_in.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await c.call({"verb": "hello", "n": 2})

    assert run_with(bench_dir, serve, scenario)["n"] == 2


def test_a_stream_left_early_closes_its_connection(bench_dir):
    async def serve(reader, writer):
        req = await read_request(reader)
        writer.write(frame({"id": req["id"], "ok": True, "type": "event", "seq": 1}))
        await writer.drain()
        await reader.read()  # until the client closes

    async def scenario():
        c = await AsyncClient(bench_dir).connect()
        gen = c.stream({"verb": "events", "follow": True})
        async for _ in gen:
            break
        await gen.aclose()
        with pytest.raises(Disconnected):
            await c.call({"verb": "hello"})

    run_with(bench_dir, serve, scenario)


def test_the_daemons_refusal_before_closing_is_the_answer(bench_dir):
    gone = asyncio.Event()

    async def serve(reader, writer):
        body = {"code": "too-many-connections", "message": "full; try again shortly"}
        writer.write(frame({"id": None, "ok": False, "type": "error", "error": body}))
        writer.close()
        await writer.wait_closed()
        gone.set()

    async def scenario():
        async with AsyncClient(bench_dir) as c:
            await gone.wait()
            with pytest.raises(WireError) as info:
                await c.call({"verb": "hello"})
            return info.value

    assert run_with(bench_dir, serve, scenario).code == "too-many-connections"


def test_a_close_without_an_answer_is_disconnected(bench_dir):
    async def serve(reader, writer):
        await read_request(reader)
        writer.close()

    async def scenario():
        async with AsyncClient(bench_dir) as c:
            with pytest.raises(Disconnected) as info:
                await c.call({"verb": "hello"})
            return info.value

    err = run_with(bench_dir, serve, scenario)
    assert err.code == "protocol" and "closed the connection" in err.message


def test_no_daemon_is_disconnected_in_the_blocking_clients_words(bench_dir):
    async def scenario():
        with pytest.raises(Disconnected) as info:
            await AsyncClient(bench_dir).connect()
        return info.value

    err = asyncio.run(scenario())
    assert err.code == "no-daemon" and "bench up" in err.message and bench_dir in err.message


def test_typed_requests_and_answers_with_the_struct_codec(bench_dir):
    async def serve(reader, writer):
        req = await read_request(reader)
        assert req == {"verb": "job/report", "id": 1, "content": "done"}
        writer.write(msgspec.json.encode(ReportOk(id=1, session="s1", bytes=4)) + b"\n")
        await writer.drain()

    async def scenario():
        async with AsyncClient(bench_dir, codec=StructCodec()) as c:
            return await c.call(JobReport(content="done"))

    assert run_with(bench_dir, serve, scenario) == ReportOk(id=1, session="s1", bytes=4)


# ---------------------------------------------------------------- KeptClient


def test_a_kept_connection_closed_as_idle_is_replaced_and_the_request_sent_again(bench_dir):
    conns = []
    idle_closed = asyncio.Event()

    async def serve(reader, writer):
        conns.append(writer)
        req = await read_request(reader)
        writer.write(frame({"id": req["id"], "ok": True, "type": "hello", "n": req["n"]}))
        if len(conns) == 1:  # the first connection then waits too long for a request
            body = {"code": "idle-timeout", "message": "closed after 1 s with no request"}
            writer.write(frame({"id": None, "ok": False, "type": "error", "error": body}))
            writer.close()
            await writer.wait_closed()
            idle_closed.set()
        await writer.drain()

    async def scenario():
        async with KeptClient(bench_dir) as c:
            first = await c.call({"verb": "hello", "n": 1})
            await idle_closed.wait()
            second = await c.call({"verb": "hello", "n": 2})
            return first["n"], second["n"]

    assert run_with(bench_dir, serve, scenario) == (1, 2)
    assert len(conns) == 2  # the ended connection was replaced once


def test_a_kept_connection_that_breaks_under_a_call_sends_it_again_typed(bench_dir):
    seen = []

    async def serve(reader, writer):
        req = await read_request(reader)
        seen.append(req)
        if len(seen) == 1:
            writer.close()  # broke before answering: the outcome is unknown
            return
        writer.write(msgspec.json.encode(ReportOk(id=req["id"], session="s1", bytes=4)) + b"\n")
        await writer.drain()

    async def scenario():
        async with KeptClient(bench_dir, codec=StructCodec()) as c:
            return await c.call(JobReport(content="done"))

    assert run_with(bench_dir, serve, scenario).session == "s1"
    assert [r["content"] for r in seen] == ["done", "done"]


def test_a_kept_connection_raises_refusals_without_sending_again(bench_dir):
    conns = []

    async def serve(reader, writer):
        conns.append(writer)
        req = await read_request(reader)
        body = {"code": "shutting-down", "message": "the daemon is stopping"}
        writer.write(frame({"id": req["id"], "ok": False, "type": "error", "error": body}))
        await writer.drain()

    async def scenario():
        async with KeptClient(bench_dir) as c:
            with pytest.raises(WireError) as info:
                await c.call({"verb": "hello"})
            return info.value

    err = run_with(bench_dir, serve, scenario)
    assert err.code == "shutting-down" and not isinstance(err, Disconnected)
    assert len(conns) == 1


def test_a_kept_connection_whose_daemon_is_gone_is_no_daemon(bench_dir):
    async def main():
        async def serve(reader, writer):
            await read_request(reader)
            writer.close()

        path = os.path.join(bench_dir, "benchd.sock")
        server = await asyncio.start_unix_server(serve, path)
        c = await KeptClient(bench_dir).connect()
        server.close()  # no new connections: the daemon is gone
        await server.wait_closed()
        os.unlink(path)
        with pytest.raises(Disconnected) as info:
            await c.call({"verb": "hello"})
        return info.value

    err = asyncio.run(main())
    assert err.code == "no-daemon" and "bench up" in err.message


def test_a_kept_connection_that_always_breaks_gives_up_as_no_daemon(bench_dir):
    conns = []

    async def serve(reader, writer):
        conns.append(writer)
        await read_request(reader)
        writer.close()

    async def scenario():
        async with KeptClient(bench_dir, attempts=3) as c:
            with pytest.raises(Disconnected) as info:
                await c.call({"verb": "hello"})
            return info.value

    err = run_with(bench_dir, serve, scenario)
    assert err.code == "no-daemon" and "3 times" in err.message
    assert len(conns) == 3
