"""The MCP server behind `bench mcp` (docs/mcp.md): the tools of `bench_mcp.tools` over stdio.

Built on the `mcp` SDK's low-level server, so the tool schemas are exactly bench's and
every argument error is bench's own (`bad-request` with a sentence). Each call is one
connection to the daemon (`bench_wire.asyncclient`) with BENCH_TOKEN from the
environment, so the daemon derives the caller exactly as for `bench mail send`.

The stdio transport is its own (`transport`): the SDK's decodes stdin with
errors="replace" and answers nothing to a line it cannot parse, so a client would wait
forever. Here invalid UTF-8 or JSON gets JSON-RPC's parse error (-32700, id null), JSON
that is no JSON-RPC message invalid request (-32600, its id if it has one), and the
next line is read. While it serves, fd 0 reads /dev/null and fd 1 writes to stderr, so
a library's stray print cannot tear a frame on the wire.
"""

import functools
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, TypeVar

import anyio
import anyio.to_thread
import mcp_types as types
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from bench_cli import entry, hints, output
from bench_mcp import tools as t
from bench_wire import messages as m
from bench_wire.asyncclient import AsyncClient
from bench_wire.errors import WireError
from bench_wire.messages import StructCodec
from bench_wire.untrusted import escape

log = logging.getLogger("bench.mcp")

# The server's lifespan state: the SDK's default lifespan (an empty dict); the handlers
# use none of it.
Lifespan = dict[str, Any]
Ctx = ServerRequestContext[Lifespan]
R = TypeVar("R", bound=m.Response)
T = TypeVar("T")

# Each connect, write and read, as the blocking client's default: a daemon that hangs
# fails the one tool call instead of leaving the model waiting.
TIMEOUT_S = 30.0

NAME = "bench"
INBOX_URI = "bench://mail/inbox"
MESSAGE_PREFIX = "bench://mail/"

INSTRUCTIONS = (
    "bench is the mailroom of the agents on this machine. You have a handle (whoami) and "
    "a mailbox. When mail arrives, a line `You have mail from <sender>: <path>` is typed "
    "into your terminal: call read_mail with that path, then answer with reply or "
    "send_mail. You are always the sender; you can read only your own mailbox. "
    "mail_status shows what became of mail you sent; wait_for_mail blocks until mail "
    "arrives (for an agent that cannot be woken through a terminal)."
)

# Refusals that are the caller's to fix (JSON-RPC invalid params) rather than the
# daemon's trouble, for resource reads (tool errors are tool results, not JSON-RPC errors).
_CALLER_CODES = {
    "bad-id",
    "bad-request",
    "no-such-message",
    "no-unread",
    "forbidden",
    "bad-handle",
    "bad-limit",
    "bad-cursor",
}


class Daemon:
    """The daemon as the tools see it: one request per connection."""

    def __init__(self, bench_dir: str | None = None):
        self.bench_dir = bench_dir

    async def call(self, req: m.Request[R], wait_s: float = TIMEOUT_S) -> R:
        """One request, its typed answer; `wait_s`: how long the answer may take (a wait's
        timeout and more). The session's BENCH_TOKEN goes with it."""
        codec = StructCodec(os.environ.get("BENCH_TOKEN"))
        async with AsyncClient(self.bench_dir, timeout=wait_s, codec=codec) as conn:
            return await conn.call(req)

    async def known_handles(self) -> set[str]:
        """Every handle a sender could mean (asked only when an address looks wrong):
        the sessions the daemon remembers and the mailboxes on disk."""
        from bench_wire.client import resolve_dir

        names = {"operator"}
        try:
            names |= {s.handle for s in (await self.call(m.SessionList())).sessions}
        except WireError:
            pass
        try:
            names.update(entry.mailboxes(resolve_dir(self.bench_dir)))
        except WireError:
            pass
        return names

    async def check_body(self, body: str) -> None:
        """Refuse a body over the daemon's cap here, as the CLI does: sent, it would
        not fit in one frame and the daemon could only say frame-too-long."""
        size = len(body.encode("utf-8", "surrogatepass"))
        if size <= entry.SURE_BODY_BYTES:
            return  # within every cap a daemon has: its own check is enough
        cap = (await self.call(m.Hello())).caps.body_bytes
        if size > cap:
            raise entry.too_large(size, cap)


def plain(answer: m.Response) -> t.Json:
    """A typed answer as plain data (its wire names: `from`), for the formatters the
    fast path shares (`bench_cli.output`) and a tool's structured content."""
    data: t.Json = msgspec.to_builtins(answer)
    return data


# ---------------------------------------------------------------- tools


async def send_mail(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    await d.check_body(a["body"])
    # The tool's arguments are the request's fields; in_reply_to may be a wake line's path.
    if "in_reply_to" in a:
        a = dict(a, in_reply_to=t.message_ref(a["in_reply_to"])[1])
    try:
        sent = await d.call(m.MailSend(**a))
    except WireError as err:  # `Dan`, `Carol@node2`: the address probably meant, as the CLI says
        if err.code in ("bad-handle", "bad-node"):
            err.message += hints.address(a["to"], await d.known_handles())
        raise
    ans = plain(sent)
    text = output.sent(ans)
    if sent.new_mailbox:  # a typo, perhaps
        text += hints.handle(sent.to, await d.known_handles())
    return text, t.public(ans)


async def list_mail(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    # The tool's arguments are the request's fields (check_args has held state to its enum).
    ans = plain(await d.call(m.MailList(**a)))
    return t.listing_text(ans, a.get("state", "unread")), t.public(ans)


async def search_mail(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    found = await d.call(
        m.MailSearch(query=a["query"], sender=a.get("sent_by"), limit=a.get("limit"))
    )
    lines = [
        f"{h.mail_id}  from {h.sender}  {h.state}  {h.subject}\n    {h.snippet}" for h in found.hits
    ]
    more = " (more: raise limit)" if found.truncated else ""
    lines.append(output.count(len(found.hits), "match", "matches") + more)
    return escape("\n".join(lines)), t.public(plain(found))


async def read_mail(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    handle, mail_id = t.message_ref(a["id"]) if "id" in a else (None, None)
    ans = plain(await d.call(m.MailRead(handle=handle, mail_id=mail_id)))
    return output.message(ans), t.public(ans)


async def reply(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    handle, mail_id = t.message_ref(a["id"])
    await d.check_body(a["body"])
    # Read first: the message is marked read, and one in another's mailbox is forbidden.
    msg = await d.call(m.MailRead(handle=handle, mail_id=mail_id))
    ans = await d.call(m.MailReply(mail_id=msg.mail_id, body=a["body"]))
    sent = [t.public(plain(s)) for s in ans.sent]
    text = "\n".join(f"replied to {msg.mail_id}: " + output.sent(s) for s in sent)
    return text, {"in_reply_to": ans.in_reply_to, "sent": sent}


async def thread(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    # A wake line's path names the caller's own mailbox: the id is what the daemon needs.
    mail_id = t.message_ref(a["id"])[1]
    ans = await d.call(m.MailThread(mail_id=mail_id))
    return escape(t.thread_text(ans)), t.public(plain(ans))


async def report(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    ans = await d.call(m.JobReport(content=a["content"]))
    return (
        f"reported {ans.bytes} bytes for session {ans.session}; it is mailed to "
        "the job's reply-to handles when this session ends",
        t.public(plain(ans)),
    )


async def mail_status(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    mail_id = t.message_ref(a["id"])[1]
    ans = await d.call(m.MailStatus(mail_id=mail_id))
    lines = [f"{ans.mail_id} to {ans.to}: {ans.state}"]
    for s in ans.states:
        extra = ", ".join(f"{k} {v}" for k in output.MARK_DETAILS if (v := getattr(s, k)))
        lines.append(f"  {s.state} at {s.at}" + (f" ({extra})" if extra else ""))
    return escape("\n".join(lines)), t.public(plain(ans))


async def wait_for_mail(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    timeout = float(a.get("timeout_seconds", 60))
    reply_to = a.get("reply_to")
    if reply_to is not None:
        reply_to = t.message_ref(reply_to)[1]
    req = m.MailWait(sender=a.get("sent_by"), reply_to=reply_to, timeout=timeout)
    ans = plain(await d.call(req, wait_s=timeout + TIMEOUT_S))
    return output.message(ans), t.public(ans)


async def whoami(d: Daemon, a: t.Json) -> tuple[str, t.Json]:
    hello = await d.call(m.Hello())
    unread = (await d.call(m.MailList(state="unread", limit=1))).total
    me = hello.caller
    session = None
    if me != "operator":  # the daemon's word, not the environment's: the live session's id
        live = (await d.call(m.SessionList())).sessions
        session = next((x.session for x in live if x.handle == me and x.state == "running"), None)
    info = {
        "handle": me,
        "session": session,
        "bench_dir": hello.bench_dir,
        "unread": unread,
        "daemon": {"pid": hello.pid, "version": hello.version},
    }
    who = f"You are {me}" + (f" (session {session})" if session else "")
    return f"{who}; BENCH_DIR {hello.bench_dir}; {unread} unread.", info


async def _answer(d: Daemon, a: t.Json, allow: bool) -> tuple[str, t.Json]:
    ans = await d.call(m.AgentAnswer(handle=a["handle"], allow=allow, reason=a.get("reason")))
    what = "approved" if allow else "denied"
    tool = f" {ans.tool}" if ans.tool else ""
    return escape(f"{what}{tool} for {ans.handle} (session {ans.session})"), t.public(plain(ans))


approve = functools.partial(_answer, allow=True)  # its schema takes no reason
deny = functools.partial(_answer, allow=False)


# Each handler takes its tool's arguments as check_args has held them to its schema, and
# is the function of the tool's name above (a tool without one fails the import).
Handler = Callable[[Daemon, t.Json], Awaitable[tuple[str, t.Json]]]
HANDLERS: dict[str, Handler] = {name: globals()[name] for name in t.TOOLS}


def error_result(err: WireError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=t.error_text(err))],
        structured_content={"error": {"code": err.code, "message": err.message}},
        is_error=True,
    )


async def call_tool(d: Daemon, name: str, args: t.Json | None) -> types.CallToolResult:
    """One tool call: checked arguments, the daemon's answer, or bench's error."""
    try:
        checked = t.check_args(name, args)
        text, data = await HANDLERS[name](d, checked)
    except WireError as err:
        return error_result(err)
    except Exception:  # a bug here must not end the server: log it, answer `internal`
        log.exception("tool %s failed", name)
        return error_result(
            WireError(
                "internal", f"the bench MCP server failed in {name}; its stderr has the details"
            )
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=data
    )


# ---------------------------------------------------------------- resources


async def read_resource(d: Daemon, uri: str) -> types.TextResourceContents:
    try:
        if uri == INBOX_URI:
            listed = plain(await d.call(m.MailList(state="unread")))
            return types.TextResourceContents(
                uri=uri, mime_type="application/json", text=json.dumps(t.public(listed))
            )
        mail_id = uri[len(MESSAGE_PREFIX) :] if uri.startswith(MESSAGE_PREFIX) else ""
        if not mail_id or "/" in mail_id:
            raise WireError(
                "bad-request",
                f"there is no resource {uri!r}: bench has {INBOX_URI} and {MESSAGE_PREFIX}<id>",
            )
        msg = plain(await d.call(m.MailRead(mail_id=mail_id)))
        return types.TextResourceContents(
            uri=uri, mime_type="text/markdown", text=output.message(msg)
        )
    except WireError as err:
        code = types.INVALID_PARAMS if err.code in _CALLER_CODES else types.INTERNAL_ERROR
        raise MCPError(
            code=code, message=t.error_text(err), data={"code": err.code, "message": err.message}
        ) from None


# What the list requests answer (`_always`): bench's lists are short, one page each.
TOOL_LIST = [
    types.Tool(
        name=name,
        description=desc,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=name in t.READ_ONLY),
    )
    for name, (desc, schema) in t.TOOLS.items()
]
RESOURCES = [
    types.Resource(
        uri=INBOX_URI,
        name="inbox",
        mime_type="application/json",
        description="Your unread mail: metadata of the first page (nothing is marked read).",
    ),
]
TEMPLATES = [
    types.ResourceTemplate(
        uri_template=MESSAGE_PREFIX + "{id}",
        name="message",
        mime_type="text/markdown",
        description="One message of your mailbox by id; reading an "
        "unread message marks it read, as read_mail does.",
    ),
]
PROMPTS = [
    types.Prompt(
        name="wake",
        description="What bench's wake line means and how to answer it with these tools.",
        arguments=[
            types.PromptArgument(name="line", required=False, description="a wake line to answer")
        ],
    ),
]


def _always(result: T) -> Callable[[Ctx, Any], Awaitable[T]]:
    """A handler that answers every request with `result`."""

    async def handler(ctx: Ctx, params: Any) -> T:
        return result

    return handler


# ---------------------------------------------------------------- wiring


def build(bench_dir: str | None = None) -> Server[Lifespan]:
    d = Daemon(bench_dir)

    async def on_call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call_tool(d, params.name, params.arguments)

    async def on_read_resource(
        ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[await read_resource(d, str(params.uri))])

    async def on_get_prompt(
        ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != "wake":
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"there is no prompt {params.name!r}; bench has: wake",
            )
        text = t.wake_prompt((params.arguments or {}).get("line"))
        return types.GetPromptResult(
            description=PROMPTS[0].description,
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    return Server(
        NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=_always(types.ListToolsResult(tools=TOOL_LIST)),
        on_call_tool=on_call_tool,
        on_list_resources=_always(types.ListResourcesResult(resources=RESOURCES)),
        on_list_resource_templates=_always(
            types.ListResourceTemplatesResult(resource_templates=TEMPLATES)
        ),
        on_read_resource=on_read_resource,
        on_list_prompts=_always(types.ListPromptsResult(prompts=PROMPTS)),
        on_get_prompt=on_get_prompt,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bench")
    except PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- stdio

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


async def serve(bench_dir: str | None = None) -> None:
    server = build(bench_dir)
    async with transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(bench_dir: str | None = None) -> int:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="bench mcp: %(levelname)s %(message)s"
    )
    try:
        anyio.run(serve, bench_dir)
    except KeyboardInterrupt:
        return 130
    return 0
