"""A connection's own socket I/O (benchd/server/connection.py) over a real socketpair:
frames go out whole and in order, a stream that never blocks still lets other tasks
run, a frame too big for the socket buffer is finished under the send lock, and a peer
that has gone reads as EOF."""

import json
import socket
from types import SimpleNamespace

import trio

from bench_wire.messages import ErrorBody, ErrorResponse, SessionDetach
from benchd.server.connection import YIELD_EVERY, Connection


def _conn(sock) -> Connection:
    daemon = SimpleNamespace(caps=SimpleNamespace(frame_bytes=1 << 20))
    return Connection(daemon, trio.SocketStream(sock), peer_pid=0)


def _frame(i: int, text: str = "x") -> ErrorResponse:
    return ErrorResponse(id=i, error=ErrorBody("internal", text))


def _lines(sock: socket.socket, n: int) -> list[dict]:
    buf = b""
    while buf.count(b"\n") < n:
        chunk = sock.recv(1 << 16)
        assert chunk, "the connection closed early"
        buf += chunk
    return [json.loads(x) for x in buf.split(b"\n")[:n]]


def test_a_stream_that_never_blocks_still_lets_other_tasks_run():
    sent: list[int] = []
    seen_while_sending: list[int] = []
    ours, theirs = socket.socketpair()
    n = 3 * YIELD_EVERY  # small frames: all fit in the socket buffer, nothing blocks

    async def main():
        conn = _conn(trio.socket.from_stdlib_socket(ours))

        async def other():
            while True:
                seen_while_sending.append(len(sent))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            await trio.lowlevel.checkpoint()  # other runs once before the stream
            for i in range(n):
                await conn.send(_frame(i))
                sent.append(i)
            nursery.cancel_scope.cancel()

    trio.run(main)
    got = _lines(theirs, n)
    theirs.close()
    assert [f["id"] for f in got] == list(range(n))
    # The other task ran part-way through the stream, not only before and after it.
    assert any(0 < k < n for k in seen_while_sending), seen_while_sending


def test_a_frame_bigger_than_the_socket_buffer_arrives_whole_and_in_order():
    ours, theirs = socket.socketpair()
    big = "y" * (4 << 20)  # far past any socket buffer: the write is partial and waits

    async def main():
        conn = _conn(trio.socket.from_stdlib_socket(ours))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.send, _frame(1, big))
            nursery.start_soon(conn.send, _frame(2))  # must not land inside frame 1
            return await trio.to_thread.run_sync(_lines, theirs, 2)

    got = trio.run(main)
    theirs.close()
    assert sorted(f["id"] for f in got) == [1, 2]
    assert {f["id"]: len(f["error"]["message"]) for f in got} == {1: len(big), 2: 1}


def test_a_peer_that_has_gone_reads_as_eof_and_refuses_writes():
    ours, theirs = socket.socketpair()
    theirs.sendall(b'{"verb":"hello","id":7}\n')
    theirs.close()

    async def main():
        conn = _conn(trio.socket.from_stdlib_socket(ours))
        first = await conn.next_line()
        end = await conn.next_line()
        try:
            for i in range(64):  # the first write may still be taken by the kernel
                await conn.send(_frame(i))
        except trio.BrokenResourceError:
            return first, end, "broken"
        return first, end, "sent"

    first, end, wrote = trio.run(main)
    assert first == b'{"verb":"hello","id":7}'
    assert end is None
    assert wrote == "broken"


def test_while_present_says_how_a_stream_ended():
    """The one watcher of a long answer's client: the stream running out is "done", the
    client closing its end is "gone" (the stream is cancelled), and a request the
    handler takes as the end is "stopped"."""

    async def main():
        out = {}
        ours, theirs = socket.socketpair()
        conn = _conn(trio.socket.from_stdlib_socket(ours))

        async def short():
            await conn.send(_frame(1))

        out["done"] = await conn.while_present(short)

        async def forever():
            await trio.sleep_forever()

        theirs.close()
        out["gone"] = await conn.while_present(forever)

        ours2, theirs2 = socket.socketpair()
        conn2 = _conn(trio.socket.from_stdlib_socket(ours2))
        seen = []

        async def on_request(req):
            seen.append(type(req).__name__)
            return isinstance(req, SessionDetach)

        theirs2.sendall(b'{"verb": "hello", "id": 1}\n{"verb": "session/detach", "id": 2}\n')
        out["stopped"] = await conn2.while_present(forever, on_request)
        theirs2.close()
        return out, seen

    out, seen = trio.run(main)
    assert out == {"done": "done", "gone": "gone", "stopped": "stopped"}
    assert seen == ["Hello", "SessionDetach"]
