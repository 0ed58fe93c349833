"""`bench mcp`'s stdio transport: JSON-RPC lines on stdin and stdout, every line answered.

The SDK's own stdio transport decodes stdin with errors="replace" (so invalid UTF-8
passes as U+FFFD) and hands a line it cannot parse to the server as an exception, which
answers nothing: a client would wait for an answer that never comes. Here each line is
read as bytes and checked first (`parse_line`, pure): invalid UTF-8 and invalid JSON,
however deeply nested, are answered with JSON-RPC's parse error (-32700, id null); JSON
that is no JSON-RPC message gets invalid request (-32600, with its id when it has one).
Then the next line is read: one bad line never ends the server.

While it serves, fd 0 reads /dev/null and fd 1 writes to stderr, so nothing else in the
process (a library's stray print) can tear a frame on the wire.
"""

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import BinaryIO

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR = -32700  # JSON-RPC 2.0: invalid JSON was received
INVALID_REQUEST = -32600  # JSON-RPC 2.0: the JSON sent is not a valid request object


def _error(rid: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message)
    )


def parse_line(raw: bytes) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """The message one line holds, or else the error that answers it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, _error(
            None,
            PARSE_ERROR,
            f"parse error: the line is not valid UTF-8 (byte 0x{raw[err.start]:02x} at "
            f"offset {err.start})",
        )
    try:
        obj = json.loads(text)
    except RecursionError:
        return None, _error(None, PARSE_ERROR, "parse error: the JSON is nested too deeply")
    except ValueError as err:
        return None, _error(None, PARSE_ERROR, f"parse error: the line is not valid JSON ({err})")
    try:
        return types.jsonrpc_message_adapter.validate_python(obj, by_name=False), None
    except (ValidationError, RecursionError):
        rid = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            rid = None
        return None, _error(
            rid, INVALID_REQUEST, "invalid request: the line is not a JSON-RPC 2.0 message"
        )


def _claim() -> tuple[BinaryIO, BinaryIO, int, int]:
    """The wire's own copies of fds 0 and 1; fd 0 then reads /dev/null, fd 1 goes to 2."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = os.fdopen(wire_in, "rb", closefd=False)
    writer = os.fdopen(wire_out, "wb", closefd=False)
    return reader, writer, wire_in, wire_out


def _release(wire_in: int, wire_out: int) -> None:
    os.dup2(wire_in, 0)
    os.dup2(wire_out, 1)
    # Not closed: a worker thread may still block reading wire_in (it ends with us).


@asynccontextmanager
async def transport() -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """(read stream, write stream) for `Server.run`, over this process's stdin/stdout."""
    reader, writer, wire_in, wire_out = _claim()
    lock = anyio.Lock()  # the server's answers and the parse errors share one stdout

    async def write(message: types.JSONRPCMessage) -> None:
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        async with lock:
            await anyio.to_thread.run_sync(_write_all, writer, data)

    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()

    async def read_lines() -> None:
        async with incoming_send:
            while True:
                raw = await anyio.to_thread.run_sync(reader.readline, abandon_on_cancel=True)
                if not raw:
                    return  # stdin closed: the client is done
                if not raw.strip():
                    continue
                message, error = parse_line(raw)
                if message is not None:
                    await incoming_send.send(SessionMessage(message))
                elif error is not None:
                    await write(error)

    async def write_lines() -> None:
        try:
            async with outgoing_receive:
                async for session_message in outgoing_receive:
                    await write(session_message.message)
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            try:
                yield incoming, outgoing
            finally:
                await outgoing.aclose()  # what the server sent is written, then we stop
                with anyio.move_on_after(5):
                    await written.wait()
                tg.cancel_scope.cancel()
    finally:
        _release(wire_in, wire_out)


def _write_all(f: BinaryIO, data: bytes) -> None:
    f.write(data)
    f.flush()
