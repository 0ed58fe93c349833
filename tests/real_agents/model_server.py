"""A scripted model server for driving real agent CLIs offline (stdlib only).

It speaks three streaming wire formats on 127.0.0.1:

- Anthropic Messages (``POST /v1/messages``, also ``?beta=true``; plus
  ``POST /v1/messages/count_tokens``) — Claude Code;
- OpenAI chat completions (``POST /v1/chat/completions``) — pi;
- OpenAI responses (``POST /v1/responses``) — Codex;

and ``GET /v1/models`` for any agent that lists models.

Every answer is decided from the request alone:

- the latest turn is the last message that is not a system/developer message (Claude
  Code appends ``role: "system"`` messages after the user's; Codex sends developer
  messages);
- if that turn is a tool result → a short final text (``done``);
- if it is user text holding ``You have mail from X: PATH`` and the request offers a
  shell tool → exactly one shell tool call, in the agent's own tool shape (the tool
  name and its command argument are read from the tool definitions in the request),
  whose command reads PATH, takes the first integer of the body after the front
  matter, adds one and runs ``bench mail send NEXT --in-reply-to ID -m "number N+1"`` (ID:
  the file name of PATH without ``.md``, the mail's id, so each hop replies to the mail
  that woke it). NEXT is
  ``ring[recipient]`` where the recipient is read from the path
  (``.../mail/<recipient>/(read|inbox)/<id>.md``), else ``ring["*"]`` if given; with
  neither, a short text instead of a tool call;
- if the request offers bench's MCP tools (``mcp__bench__read_mail`` and
  ``..._send_mail``), the wake is answered through them instead, in two calls:
  ``read_mail {"id": PATH}``, then, on its result, ``send_mail {"to": NEXT, "body":
  "number N+1", "in_reply_to": ID}`` where NEXT is ``ring[<the result's to: header>]``
  and ID the result's id; the send's result
  gets the final text;
- anything else (titles, greetings, ...) → a short text.

While ``limited_until`` (epoch seconds) lies ahead, Anthropic and chat-completions
requests get a usage-limit 429 instead (``x-should-retry: false``, ``retry-after``; the
chat one's message says ``It resets at <ISO time>``).

Every request is logged as one JSON line (``ts``, ``method``, ``path``, ``body``,
``reply``) to the log file given at construction.

Python API: ``start_server(ring, log_path) -> (server, port)``; stop it with
``server.shutdown(); server.server_close()``.

CLI: ``python -m tests.real_agents.model_server --ring a=b,b=c,c=operator --log FILE``
prints the port on stdout, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import re
import shlex
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The path ends at a space or "<": Codex hands a Stop hook's line to the model wrapped
# in <hook_prompt ...>LINE</hook_prompt>.
MAIL_RE = re.compile(r"You have mail from (\S+): ([^\s<]+)")
WORK_RE = re.compile(r"\bWORK (\d+(?:\.\d+)?)\b")  # a prompt asking for a turn that lasts
RECIPIENT_RE = re.compile(r"/mail/([^/]+)/(?:read|inbox)/[^/]+$")

FINAL_TEXT = "done"
SMALLTALK_TEXT = "Hello."

# Tool names we recognise as "run a shell command", best first.
SHELL_TOOL_NAMES = ("Bash", "bash", "exec_command", "shell", "run_shell_command", "local_shell")
# Argument names that carry the command line, best first.
COMMAND_ARG_NAMES = ("command", "cmd")
SYSTEM_ROLES = ("system", "developer")

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000):x}{next(_ids):06d}"


# --------------------------------------------------------------------------- decisions


def mail_command(path: str, next_handle: str) -> str:
    """The shell line that answers one wake: read PATH, add one, mail NEXT.

    POSIX sh + awk only (Codex may run it under ``sh``): the awk program skips the
    YAML front matter (the lines up to the second ``---``; a file that does not start
    with ``---`` is all body), strips a trailing CR, and prints the first integer of
    the body plus one. Leading zeros are harmless (awk arithmetic is decimal).
    """
    prog = (
        '{ sub(/\\r$/, "") } '
        'NR == 1 && $0 != "---" { f = 1 } '
        "f && match($0, /[0-9]+/) { print substr($0, RSTART, RLENGTH) + 1; exit } "
        '$0 == "---" && ++c == 2 { f = 1 }'
    )
    qpath = shlex.quote(path)
    name = path.rsplit("/", 1)[-1]
    reply = f"--in-reply-to {shlex.quote(name[:-3])} " if name.endswith(".md") else ""
    return (
        f"n=$(awk {shlex.quote(prog)} {qpath}) && "
        f'[ -n "$n" ] && bench mail send {shlex.quote(next_handle)} {reply}-m "number $n"'
    )


def recipient_from_path(path: str) -> str | None:
    m = RECIPIENT_RE.search(path)
    return m.group(1) if m else None


class Turn:
    """The latest non-system turn of a request, format-independent."""

    def __init__(self, kind: str, text: str = "", tool: str = "") -> None:
        self.kind = kind  # "user", "tool_result", "assistant" or "none"
        self.text = text  # the user's text, or the tool result's text
        self.tool = tool  # for a tool result: the name of the tool that was called

    def __repr__(self) -> str:
        return f"Turn({self.kind!r}, {self.text[:60]!r})"


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                t = block.get("text")
                if isinstance(t, str):
                    parts.append(t)
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return ""


def latest_turn_anthropic(body: dict) -> Turn:
    msgs = [m for m in body.get("messages") or [] if m.get("role") not in SYSTEM_ROLES]
    if not msgs:
        return Turn("none")
    last = msgs[-1]
    content = last.get("content")
    if last.get("role") != "user":
        return Turn("assistant", _text_of(content))
    results = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_result"]
    if isinstance(content, list) and results:
        called = {}
        for m in msgs[:-1]:
            for b in m.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    called[b.get("id")] = b.get("name", "")
        r = results[-1]
        return Turn("tool_result", _text_of(r.get("content")), called.get(r.get("tool_use_id"), ""))
    return Turn("user", _text_of(content))


def latest_turn_chat(body: dict) -> Turn:
    msgs = [m for m in body.get("messages") or [] if m.get("role") not in SYSTEM_ROLES]
    if not msgs:
        return Turn("none")
    last = msgs[-1]
    role = last.get("role")
    if role in ("tool", "function"):
        called = {}
        for m in msgs[:-1]:
            for c in m.get("tool_calls") or []:
                called[c.get("id")] = (c.get("function") or {}).get("name", "")
        return Turn(
            "tool_result",
            _text_of(last.get("content")),
            called.get(last.get("tool_call_id"), last.get("name") or ""),
        )
    if role == "user":
        return Turn("user", _text_of(last.get("content")))
    return Turn("assistant", _text_of(last.get("content")))


def _called_name(item: dict) -> str:
    """A responses function call's tool name, with its namespace (``mcp__bench__read_mail``)."""
    name, ns = item.get("name", ""), item.get("namespace")
    return f"{ns}__{name}" if ns and not name.startswith(f"{ns}__") else name


def _split_namespace(body: dict, tool: str) -> tuple[str | None, str]:
    """(namespace, name) for a responses tool call: Codex offers MCP tools in namespaces."""
    for t in body.get("tools") or []:
        if isinstance(t, dict) and t.get("type") == "namespace":
            ns = t.get("name", "")
            if tool.startswith(f"{ns}__"):
                return ns, tool[len(ns) + 2 :]
    return None, tool


def latest_turn_responses(body: dict) -> Turn:
    items = body.get("input")
    if isinstance(items, str):
        return Turn("user", items)
    kept = []
    for it in items or []:
        if not isinstance(it, dict):
            continue
        typ = it.get("type", "message")
        if typ == "message" and it.get("role") in SYSTEM_ROLES:
            continue
        kept.append(it)
    if not kept:
        return Turn("none")
    last = kept[-1]
    typ = last.get("type", "message")
    if typ.endswith("_call_output") or typ == "tool_result":
        called = {it.get("call_id"): _called_name(it) for it in kept if "name" in it}
        out = last.get("output")
        return Turn(
            "tool_result",
            out if isinstance(out, str) else _text_of(out),
            called.get(last.get("call_id"), ""),
        )
    if typ == "message" and last.get("role") == "user":
        return Turn("user", _text_of(last.get("content")))
    return Turn("assistant")


def _tool_defs(body: dict) -> list[tuple[str, dict]]:
    """(name, JSON schema of arguments) for every tool the request offers."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("function"), dict):  # chat completions
            fn = t["function"]
            out.append((fn.get("name", ""), fn.get("parameters") or {}))
        elif "input_schema" in t:  # anthropic
            out.append((t.get("name", ""), t.get("input_schema") or {}))
        elif t.get("type") == "namespace":  # responses: Codex groups an MCP server's tools
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    name = f"{t.get('name')}__{inner['name']}"
                    out.append((name, inner.get("parameters") or {}))
        elif t.get("name"):  # responses
            out.append((t["name"], t.get("parameters") or {}))
        elif t.get("type") == "local_shell":
            out.append(("local_shell", {}))
    return out


def shell_tool(body: dict) -> tuple[str, str, bool] | None:
    """(tool name, command argument name, argument wants an argv list) or None."""
    tools = dict(_tool_defs(body))
    for name in SHELL_TOOL_NAMES:
        if name not in tools:
            continue
        props = (tools[name] or {}).get("properties") or {}
        for arg in COMMAND_ARG_NAMES:
            if arg in props:
                return name, arg, (props[arg] or {}).get("type") == "array"
        if not props:
            return name, "command", False
    return None


class Decision:
    def __init__(self, text: str | None = None, tool: str | None = None, args: dict | None = None):
        self.text = text
        self.tool = tool
        self.args = args or {}

    def summary(self) -> dict:
        if self.tool:
            return {"tool": self.tool, "args": self.args}
        return {"text": self.text}


def mail_tools(body: dict) -> dict[str, str] | None:
    """{"read_mail": name, "send_mail": name} when the request offers bench's MCP tools.

    Agents prefix MCP tools with the server's name (Claude Code and Codex:
    ``mcp__bench__read_mail``); a bare ``read_mail`` counts too.
    """
    names = [n for n, _ in _tool_defs(body)]
    found = {}
    for want in ("read_mail", "send_mail"):
        hits = [n for n in names if n == want or n.endswith("__" + want)]
        if not hits:
            return None
        found[want] = hits[0]
    return found


MAIL_HEADER_RE = re.compile(r"^to:\s+(\S+)", re.M)
MAIL_ID_HEADER_RE = re.compile(r"^id:\s+(\S+)", re.M)


def after_read_mail(text: str, ring: dict[str, str]) -> tuple[str, int, str | None] | None:
    """(next handle, N+1, id) from a read_mail result: the message's recipient, the first
    number of its body and its id (to answer it with in_reply_to).

    Claude Code hands the model the tool's structured content (JSON with ``to`` and
    ``body``); Codex the same JSON after a preamble (``Wall time: ...\nOutput:\n{...}``);
    an agent that passes the text on gives bench's message text instead: header lines
    (``to: alice``), a blank line, then the body.
    """
    try:
        msg = json.loads(text[text.find("{") :]) if "{" in text else None
    except ValueError:
        msg = None
    if isinstance(msg, dict) and "to" in msg and "body" in msg:
        to, mail_body = str(msg["to"]), str(msg["body"])
        mail_id = str(msg["mail_id"]) if msg.get("mail_id") else None
    else:
        m = MAIL_HEADER_RE.search(text)
        if m is None:
            return None
        head, _, mail_body = text.partition("\n\n")
        to = m.group(1)
        found = MAIL_ID_HEADER_RE.search(head)
        mail_id = found.group(1) if found else None
    n = re.search(r"[0-9]+", mail_body)
    nxt = ring.get(to) or ring.get("*")
    return (nxt, int(n.group(0)) + 1, mail_id) if nxt and n else None


def decide(turn: Turn, body: dict, ring: dict[str, str], answer: Any = None) -> Decision:
    """The reply to one request. `answer(path) -> shell line`, when given, replaces the
    ring's command for a wake (the delegation proof's alice runs her own script)."""
    mcp = mail_tools(body)
    if turn.kind == "tool_result":
        # Through MCP the answer takes two calls: read_mail, then send_mail.
        if mcp and turn.tool == mcp["read_mail"]:
            step = after_read_mail(turn.text, ring)
            if step is None:
                return Decision(text=f"I cannot tell whom to write from: {turn.text[:80]!r}")
            nxt, n, mail_id = step
            args = {"to": nxt, "body": f"number {n}", "subject": "ring"}
            if mail_id is not None:
                args["in_reply_to"] = mail_id
            return Decision(tool=mcp["send_mail"], args=args)
        return Decision(text=FINAL_TEXT)
    if turn.kind != "user":
        return Decision(text=SMALLTALK_TEXT)
    matches = MAIL_RE.findall(turn.text)
    work = WORK_RE.search(turn.text)
    if work and not matches and shell_tool(body) is not None:
        # A long turn: one shell call that sleeps (mail may arrive meanwhile).
        name, arg, wants_argv = shell_tool(body)  # type: ignore[misc]
        cmd = f"sleep {work.group(1)}"
        return Decision(tool=name, args={arg: ["bash", "-lc", cmd] if wants_argv else cmd})
    if not matches:
        return Decision(text=SMALLTALK_TEXT)
    _sender, path = matches[-1]
    if mcp:  # an agent given bench's MCP tools answers through them
        return Decision(tool=mcp["read_mail"], args={"id": path})
    tool = shell_tool(body)
    if tool is None:
        return Decision(text="You have mail.")
    name, arg, wants_argv = tool
    if answer is not None:
        cmd = answer(path)
    else:
        recipient = recipient_from_path(path)
        nxt = ring.get(recipient or "") or ring.get("*")
        if not nxt:
            return Decision(text=f"I do not know who comes after {recipient!r}.")
        cmd = mail_command(path, nxt)
    value: Any = ["bash", "-lc", cmd] if wants_argv else cmd
    return Decision(tool=name, args={arg: value})


# --------------------------------------------------------------------------- encoders


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        if name:
            out.append(f"event: {name}\ndata: {payload}\n\n")
        else:
            out.append(f"data: {payload}\n\n")
    return "".join(out).encode()


def _approx_tokens(body: dict) -> int:
    return max(1, len(json.dumps(body)) // 4)


def anthropic_reply(body: dict, d: Decision) -> tuple[str, bytes]:
    model = body.get("model") or "scripted"
    msg_id = _new_id("msg")
    in_tok = _approx_tokens(body)
    if d.tool:
        block = {"type": "tool_use", "id": _new_id("toolu"), "name": d.tool, "input": d.args}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": d.text}
        stop = "end_turn"
    usage = {"input_tokens": in_tok, "output_tokens": 10}
    if not body.get("stream"):
        full = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return "application/json", json.dumps(full).encode()
    start_block = dict(block, input={}) if d.tool else {"type": "text", "text": ""}
    if d.tool:
        delta = {"type": "input_json_delta", "partial_json": json.dumps(d.args)}
    else:
        delta = {"type": "text_delta", "text": d.text}
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": in_tok, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start_block},
        ),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "text/event-stream", _sse(events)


def chat_reply(body: dict, d: Decision) -> tuple[str, bytes]:
    model = body.get("model") or "scripted"
    cid = _new_id("chatcmpl")
    created = int(time.time())
    in_tok = _approx_tokens(body)
    usage = {"prompt_tokens": in_tok, "completion_tokens": 10, "total_tokens": in_tok + 10}
    call_id = _new_id("call")
    args_json = json.dumps(d.args)
    finish = "tool_calls" if d.tool else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": d.text}
        if d.tool:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": d.tool, "arguments": args_json},
                }
            ]
        full = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return "application/json", json.dumps(full).encode()

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    if d.tool:
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": d.tool, "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        events.append(
            (None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": args_json}}]}))
        )
    else:
        events.append((None, chunk({"content": d.text})))
    events.append((None, chunk({}, finish)))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(
            (
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                },
            )
        )
    events.append((None, "[DONE]"))
    return "text/event-stream", _sse(events)


def responses_reply(body: dict, d: Decision) -> tuple[str, bytes]:
    model = body.get("model") or "scripted"
    rid = _new_id("resp")
    created = int(time.time())
    in_tok = _approx_tokens(body)
    usage = {
        "input_tokens": in_tok,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": in_tok + 10,
    }
    if d.tool:
        item_id = _new_id("fc")
        args_json = json.dumps(d.args)
        ns, name = _split_namespace(body, d.tool)
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": _new_id("call"),
            "name": name,
            "arguments": args_json,
            "status": "completed",
        }
        if ns:
            item["namespace"] = ns
        added = dict(item, arguments="", status="in_progress")
    else:
        item_id = _new_id("msg")
        part = {"type": "output_text", "text": d.text, "annotations": []}
        item = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        added = dict(item, content=[], status="in_progress")

    def response(status: str, output: list, with_usage: bool) -> dict:
        r: dict[str, Any] = {
            "id": rid,
            "object": "response",
            "created_at": created,
            "status": status,
            "model": model,
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        }
        if with_usage:
            r["usage"] = usage
        return r

    if not body.get("stream"):
        return "application/json", json.dumps(response("completed", [item], True)).encode()

    seq = itertools.count()
    events: list[tuple[str | None, Any]] = []

    def ev(name: str, **fields: Any) -> None:
        events.append((name, {"type": name, "sequence_number": next(seq), **fields}))

    ev("response.created", response=response("in_progress", [], False))
    ev("response.in_progress", response=response("in_progress", [], False))
    ev("response.output_item.added", output_index=0, item=added)
    if d.tool:
        ev(
            "response.function_call_arguments.delta",
            item_id=item_id,
            output_index=0,
            delta=item["arguments"],
        )
        ev(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=0,
            arguments=item["arguments"],
        )
    else:
        empty_part = {"type": "output_text", "text": "", "annotations": []}
        ev(
            "response.content_part.added",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part=empty_part,
        )
        ev(
            "response.output_text.delta",
            item_id=item_id,
            output_index=0,
            content_index=0,
            delta=d.text,
        )
        ev(
            "response.output_text.done",
            item_id=item_id,
            output_index=0,
            content_index=0,
            text=d.text,
        )
        ev(
            "response.content_part.done",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part=item["content"][0],
        )
    ev("response.output_item.done", output_index=0, item=item)
    ev("response.completed", response=response("completed", [item], True))
    return "text/event-stream", _sse(events)


# --------------------------------------------------------------------------- server


class ModelServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, ring: dict[str, str], log_path: str | Path, models: list[str] | None = None):
        self.ring = dict(ring)
        self.answer: Any = None  # see decide()
        # A usage limit: until this epoch second, every Anthropic request is answered with
        # the 429 Claude Code reads as a subscription's limit (it needs
        # CLAUDE_CODE_OAUTH_TOKEN, not an API key, to read it so), and every chat
        # completion (pi) with an OpenAI-shaped 429 whose message gives the reset time.
        self.limited_until: float | None = None
        # Codex: ask for every shell call to run outside its sandbox (the model's own
        # way to ask, under `-a on-request`): a real approval prompt.
        self.escalate = False
        self.log_path = Path(log_path)
        self.models = list(models or ["scripted"])
        self.log_lock = threading.Lock()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Agents drop keep-alive connections when they exit: not worth a traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def log(self, record: dict) -> None:
        line = json.dumps(record) + "\n"
        with self.log_lock, self.log_path.open("a", encoding="utf-8") as f:
            f.write(line)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ModelServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _read_body(self) -> tuple[Any, str | None]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
        except Exception as e:  # noqa: BLE001 - report, do not crash
            return None, f"cannot decode {enc}: {e}"
        if not raw:
            return None, None
        try:
            return json.loads(raw), None
        except ValueError:
            return raw.decode("utf-8", "replace"), "not JSON"

    def _send(
        self, status: int, ctype: str, payload: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, "application/json", json.dumps(obj).encode())

    def _handle(self, method: str) -> None:
        body, problem = self._read_body() if method == "POST" else (None, None)
        route = urlsplit(self.path).path.rstrip("/")
        record: dict[str, Any] = {
            "ts": time.time(),
            "method": method,
            "path": self.path,
            "body": body,
        }
        if problem:
            record["problem"] = problem
        try:
            status, ctype, payload, reply = self._route(method, route, body)
        except Exception as e:  # noqa: BLE001 - a scripted server answers, never dies
            status, ctype = 500, "application/json"
            payload = json.dumps({"error": {"type": "server_error", "message": repr(e)}}).encode()
            reply = {"error": repr(e)}
        record["status"] = status
        record["reply"] = reply
        self.server.log(record)
        self._send(status, ctype, payload, limit_headers(self.server) if status == 429 else None)

    def _route(self, method: str, route: str, body: Any) -> tuple[int, str, bytes, Any]:
        ring = self.server.ring
        if method == "GET" and route.endswith("/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "bench", "type": "model"}
                for m in self.server.models
            ]
            obj = {"object": "list", "data": data, "models": [], "has_more": False}
            return 200, "application/json", json.dumps(obj).encode(), "models"
        if method == "POST" and isinstance(body, dict):
            if route.endswith("/messages/count_tokens"):
                n = _approx_tokens(body)
                return 200, "application/json", json.dumps({"input_tokens": n}).encode(), n
            if route.endswith("/messages") and limited(self.server):
                err = {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": "usage limit reached"},
                }
                return 429, "application/json", json.dumps(err).encode(), "429 usage limit"
            if route.endswith("/chat/completions") and limited(self.server):
                return 429, "application/json", chat_limit_body(self.server), "429 usage limit"
            if route.endswith("/responses") and limited(self.server):
                # Codex's own usage limit (a ChatGPT plan's): it shows "You've hit your
                # usage limit ... Try again at TIME".
                err = {
                    "error": {
                        "type": "usage_limit_reached",
                        "message": "usage limit reached",
                        "plan_type": "plus",
                        "resets_at": int(self.server.limited_until or time.time()),
                    }
                }
                return 429, "application/json", json.dumps(err).encode(), "429 usage limit"
            if route.endswith("/messages"):
                d = decide(latest_turn_anthropic(body), body, ring, self.server.answer)
                return (200, *anthropic_reply(body, d), d.summary())
            if route.endswith("/chat/completions"):
                d = decide(latest_turn_chat(body), body, ring, self.server.answer)
                return (200, *chat_reply(body, d), d.summary())
            if route.endswith("/responses"):
                d = decide(latest_turn_responses(body), body, ring, self.server.answer)
                if self.server.escalate and d.tool and d.tool in SHELL_TOOL_NAMES:
                    d.args = dict(d.args, sandbox_permissions="require_escalated")
                    d.args["justification"] = "the test asks for an approval"
                return (200, *responses_reply(body, d), d.summary())
        err = {"error": {"type": "not_found", "message": f"no route {method} {self.path}"}}
        return 404, "application/json", json.dumps(err).encode(), "404"

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._handle("POST")

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        # Claude Code probes ``HEAD /`` at startup: answer 200, no body.
        record = {"ts": time.time(), "method": "HEAD", "path": self.path, "body": None}
        self.server.log(dict(record, status=200, reply=None))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def limited(server: ModelServer) -> bool:
    return server.limited_until is not None and time.time() < server.limited_until


def chat_limit_body(server: ModelServer) -> bytes:
    """An OpenAI-shaped usage-limit error whose message says when it resets (pi shows it
    as `429 <message>` and its bench extension reports the limit with it)."""
    reset = int(server.limited_until or time.time())
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset))
    message = f"You have hit your usage limit. It resets at {when}."
    err = {"message": message, "type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}
    return json.dumps({"error": err}).encode()


def limit_headers(server: ModelServer) -> dict[str, str]:
    """The headers of a subscription's usage limit (seen to work with Claude Code 2.1)."""
    reset = int(server.limited_until or time.time())
    return {
        "x-should-retry": "false",
        "retry-after": str(max(1, reset - int(time.time()))),
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
    }


def start_server(
    ring: dict[str, str], log_path: str | Path, models: list[str] | None = None, answer: Any = None
) -> tuple[ModelServer, int]:
    """Start the scripted server on 127.0.0.1 (free port) in a daemon thread."""
    server = ModelServer(ring, log_path, models)
    server.answer = answer
    t = threading.Thread(target=server.serve_forever, name="model-server", daemon=True)
    t.start()
    return server, server.port


def parse_ring(spec: str) -> dict[str, str]:
    ring = {}
    for pair in filter(None, (p.strip() for p in spec.split(","))):
        k, sep, v = pair.partition("=")
        if not sep or not k or not v:
            raise ValueError(f"bad ring entry {pair!r} (want handle=next)")
        ring[k] = v
    return ring


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.real_agents.model_server")
    ap.add_argument("--ring", required=True, help="handle=next,... e.g. a=b,b=c,c=operator")
    ap.add_argument("--log", required=True, help="JSON-lines request log")
    args = ap.parse_args(argv)
    server, port = start_server(parse_ring(args.ring), args.log)
    print(port, flush=True)
    try:
        threading.Event().wait()  # serve (in the server's thread) until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
