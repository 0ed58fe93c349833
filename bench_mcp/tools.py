"""The MCP tools as a model sees them, the pure steps around their daemon calls, and the
configuration snippets that `bench mcp --print-config AGENT` prints (`snippet`).

No I/O and no `mcp` import here: the server (`bench_mcp.server`) turns these
definitions into the SDK's types, checks each call's arguments with `check_args`,
and asks the daemon. No tool takes a sender or a mailbox owner: the daemon derives
who is calling from the session the server runs in, exactly as for the CLI.
"""

import json
import re
from typing import Any

from bench_cli import output
from bench_wire.errors import WireError
from bench_wire.messages import ThreadMessage, ThreadOk

_HANDLE = "a handle: 1-64 characters of a-z 0-9 . _ -, starting with a letter or digit"
_ADDRESS = f"an address: {_HANDLE}; or handle@node for an agent on another machine (bob@node2)"
_ID = "a message id such as 20261130T045611.123Z-0001"

# A JSON object: a tool's schema, its arguments (check_args holds them to the schema, the
# one place each tool's arguments are declared), a daemon answer. The daemon's own types
# check every request it takes; here the fields are read and passed on.
Json = dict[str, Any]


def _tool(description: str, required: tuple[str, ...] = (), **props: Json) -> tuple[str, Json]:
    """A tool's description and the JSON schema of its arguments: an object of `props`."""
    schema: Json = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return description, schema


def _str(description: str) -> Json:
    return {"type": "string", "description": description}


def _count(most: int, description: str) -> Json:
    return {"type": "integer", "minimum": 1, "maximum": most, "description": description}


# name -> (description, JSON schema of the arguments). Written for a model: what the
# tool does, what it changes, and what comes back.
TOOLS: dict[str, tuple[str, Json]] = {
    "send_mail": _tool(
        "Send mail to another agent, or to `operator` (the person at the keyboard), by "
        "handle, or by handle@node to an agent on another machine (it is queued and "
        "crosses as soon as it can). You are the sender: there is no sender argument. "
        "When this returns, the message is durably in the recipient's mailbox; a live "
        "recipient is woken with a one-line notice. Returns the new message's id and "
        "whether a live session holds the recipient (if not, the mail waits in its inbox).",
        ("to", "body"),
        to=_str(f"the recipient, {_ADDRESS}"),
        body=_str("the message text (at most 256 KiB)"),
        subject=_str("one line without control characters, at most 200 characters"),
        key=_str(
            "idempotency key: sending again with the same key delivers "
            "nothing new and returns the first message's id"
        ),
        reply_to={
            "type": "array",
            "items": {"type": "string"},
            "description": "addresses (handles, or handle@node) that replies to "
            "this message should go to (default: you)",
        },
        in_reply_to=_str(f"the message this answers: {_ID}"),
    ),
    "list_mail": _tool(
        "List the messages in your mailbox in the order they were sent: id, sender, "
        "subject, date, state (unread or read) and size. Bodies are not returned and "
        "nothing is marked read; use read_mail for that. A long listing is cut into pages: "
        "pass the returned cursor to get the next one.",
        state={
            "type": "string",
            "enum": ["unread", "read", "all"],
            "description": "which messages (default: unread)",
        },
        limit=_count(500, "page size (default 50, at most 500)"),
        cursor=_str("the cursor of a previous truncated listing"),
    ),
    "read_mail": _tool(
        "Read one message from your mailbox: sender, subject, date, reply-to and the body. "
        "An unread message is marked read (moved from inbox to read; nothing is ever "
        "deleted). Without an id, reads the oldest unread message.",
        id=_str(f"{_ID}, or the path from a wake line"),
    ),
    "reply": _tool(
        "Answer a message in your mailbox: sends `body` to the addresses in its reply-to "
        "if it names any, else to its sender (on this machine or another: bob@node2), with "
        "the subject `Re: <its subject>` and in-reply-to naming it. The message is marked "
        "read. Returns the id of each reply sent.",
        ("id", "body"),
        id=_str(f"the message to answer: {_ID}, or the path from a wake line"),
        body=_str("the reply's text"),
    ),
    "report": _tool(
        "Only inside a job session (a session started with task mail and reply-to "
        "handles): record the report your job owes. It is mailed to the reply-to handles "
        "when your session ends, whatever happens; calling again replaces the earlier "
        "report.",
        ("content",),
        content=_str("the report's text"),
    ),
    "search_mail": _tool(
        "Search your mail, read and unread, by words in the subject or body: every word "
        "must occur (end a word with * for a prefix). Answers the best matches first, each "
        "with its id, sender, subject, date, state and a short snippet around the match, "
        "never the whole body; nothing is marked read. Use read_mail with an id to open one.",
        ("query",),
        query=_str("the words to look for"),
        sent_by=_str(f"only mail sent by this sender, {_ADDRESS}"),
        limit=_count(500, "at most this many matches (default 50)"),
    ),
    "thread": _tool(
        "Show the conversation a message belongs to, oldest first: each message linked to "
        "it by in-reply-to that you sent or received, with its sender, recipient, date, "
        "state and body. A conversation with agents on other machines is joined through "
        "the copies on this one. Nothing is marked read.",
        ("id",),
        id=_str(
            f"{_ID}, its id on the machine it was sent from with that "
            "node's name (20261130T045611.123Z-0001@node2), or the path from a wake line"
        ),
    ),
    "mail_status": _tool(
        "The delivery states of a message you sent, each with its time: delivered (in the "
        "recipient's mailbox), queued (waiting for another machine), not-woken and why "
        "(no-live-session, capped, operator-typing, read-first), woken (the notice was "
        "typed into the recipient's terminal), read (by a read or by the wake), active "
        "(the recipient's screen changed after the wake: a sign it started, not proof) and "
        "replied (naming the reply). Nothing changes.",
        ("id",),
        id=_str(f"{_ID} you sent"),
    ),
    "wait_for_mail": _tool(
        "Block until mail arrives in your mailbox (optionally only from one address, or "
        "only a reply to one message), then read it (marked read) and return it as "
        "read_mail does. Mail already waiting unread returns at once. Ends with the error "
        "`timeout` after timeout_seconds. Refused at once with `would-deadlock` when the "
        "agent you wait on is itself waiting (directly or through others) on you.",
        sent_by=_str(f"only mail from {_ADDRESS}"),
        reply_to=_str(f"only a reply to {_ID}"),
        timeout_seconds=_count(3600, "give up after this many seconds (default 60)"),
    ),
    "approve": _tool(
        "Allow what one of the jobs you started (or theirs) waits to do: its agent asked "
        "for an approval (bench mails you the tool and its input when it does). The job's "
        "agent goes on and runs the tool. Refused with `not-blocked` when it waits for "
        "nothing, `forbidden` for a session that is not below you.",
        ("handle",),
        handle=_str(f"the job, {_HANDLE}"),
    ),
    "deny": _tool(
        "Refuse what one of the jobs you started (or theirs) waits to do; its agent is "
        "told the reason and goes on without running the tool.",
        ("handle",),
        handle=_str(f"the job, {_HANDLE}"),
        reason=_str("what the job's agent is told"),
    ),
    "whoami": _tool(
        "Who you are to bench: your handle (the address other agents write to), your "
        "session, the state directory, and how many unread messages wait for you."
    ),
}


# Tools that change nothing (MCP's readOnlyHint): a client may call them without asking.
READ_ONLY = {"list_mail", "search_mail", "thread", "whoami", "mail_status"}

# A schema's type: the Python type it arrives as, and how an error says it.
_JSON_TYPES: dict[str, tuple[type, str]] = {
    "string": (str, "a string"),
    "integer": (int, "an integer"),
    "array": (list, "a list of strings"),
}


def check_args(tool: str, args: Json | None) -> Json:
    """The call's arguments checked against the tool's schema; WireError bad-request else.

    A lone string where a list of handles is expected is taken as a list of one (models
    often write `"reply_to": "bob"`).
    """
    if tool not in TOOLS:
        raise WireError(
            "bad-request", f"there is no tool {tool!r}; the tools are " + ", ".join(TOOLS)
        )
    schema = TOOLS[tool][1]
    props = schema["properties"]
    args = dict(args or {})
    for name in args:
        if name not in props:
            takes = ", ".join(props) or "no arguments"
            raise WireError("bad-request", f"{tool} has no argument {name!r}; it takes {takes}")
    for name in schema.get("required", []):
        if args.get(name) is None:
            raise WireError("bad-request", f"{tool} needs the argument {name!r}")
    out: Json = {}
    for name, value in args.items():
        if value is None:
            continue  # a model's explicit null means "not given"
        spec = props[name]
        if spec["type"] == "array" and isinstance(value, str):
            value = [value]
        want, said = _JSON_TYPES[spec["type"]]
        if not isinstance(value, want) or isinstance(value, bool):
            raise WireError("bad-request", f"{tool}: {name!r} must be {said}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise WireError("bad-request", f"{tool}: {name!r} must be a list of strings")
        if "enum" in spec and value not in spec["enum"]:
            raise WireError(
                "bad-request", f"{tool}: {name!r} must be one of " + ", ".join(spec["enum"])
            )
        out[name] = value
    return out


# The path in a wake line: <BENCH_DIR>/mail/<handle>/(inbox|read)/<id>.md
_WAKE_PATH = re.compile(r"(?:^|/)mail/([^/]+)/(?:inbox|read)/([^/]+)\.md$")


def message_ref(value: str) -> tuple[str | None, str]:
    """(mailbox, id) for a message id or a wake line's path; mailbox None for an id.

    The mailbox named in a path is passed on to the daemon, which refuses a session
    another's mailbox (`forbidden`), so a path is no way around identity.
    """
    value = value.strip()
    if "/" not in value and not value.endswith(".md"):
        return None, value
    m = _WAKE_PATH.search(value)
    if m is None:
        raise WireError(
            "bad-id",
            f"{value!r} is neither a message id (like 20261130T045611.123Z-0001) nor the "
            "path from a wake line (.../mail/<handle>/read/<id>.md)",
        )
    return m.group(1), m.group(2)


def listing_text(a: Json, state: str) -> str:
    """A mail/list answer as short text: one line per message, then what is left."""
    rows = [
        f"{m['mail_id']}  {m['state']:<6}  from {m['from']:<16}  {m['size']:>7} bytes  "
        f"{m['subject']}"
        for m in a.get("messages") or []
    ]
    which = "" if state == "all" else f"{state} "
    foot = f"{len(rows)} of {a['total']} {which}messages for {a['handle']}"
    if a.get("truncated"):
        foot += f"; more: list_mail with cursor {a['cursor']!r}"
    return "\n".join(rows + [foot])


def thread_text(a: ThreadOk) -> str:
    """A mail/thread answer as text: a header line per message, then its body."""

    def head(msg: ThreadMessage, to: str) -> str:
        line = f"{msg.mail_id}  from {msg.sender} to {to}  {msg.date}  {msg.state}"
        if msg.in_reply_to:
            line += f"  in reply to {msg.in_reply_to}"
        return line

    parts = output.thread_messages(a, head)
    more = " (more: the conversation is longer)" if a.truncated else ""
    return "\n".join(parts) + f"{len(parts)} messages{more}"


def public(answer: Json) -> Json:
    """A daemon answer as a tool's structured content: without the frame's id/type/ok."""
    return {k: v for k, v in answer.items() if k not in ("id", "type", "ok")}


def error_text(err: WireError) -> str:
    """The text of a tool error: bench's sentence and its code, as the CLI prints them."""
    return f"{err.message} [{err.code}]"


WAKE_PROMPT = """\
bench (a mailroom for agents on this machine) wakes you by typing one line into your \
terminal when mail arrives:

    You have mail from <sender>: <path>

<sender> is the handle that wrote to you. <path> is the message's file, already moved \
to your mailbox's read/ folder; its name is the message id followed by .md. The line \
is only a notice: the message is not in it.

To answer a wake with the bench tools:
1. Call read_mail with the path (or the id) from the line to get the message.
2. Do what it asks. Answer with reply (to its sender, or to its reply-to) or with \
send_mail to any handle; `operator` is the person at the keyboard.
3. If more mail may be waiting, list_mail shows your unread messages.

You are the sender of everything you send: no tool takes a sender, and you can read \
only your own mailbox.\
"""

_WAKE_LINE = re.compile(r"You have mail from (\S+): (\S+)")


def wake_prompt(line: str | None = None) -> str:
    """The wake prompt; with a wake line, also the exact read_mail call that answers it."""
    if not line:
        return WAKE_PROMPT
    m = _WAKE_LINE.search(line)
    if m is None:
        return WAKE_PROMPT + f"\n\n({line!r} is not a wake line.)"
    sender, path = m.groups()
    return (
        WAKE_PROMPT + f"\n\nThis wake: mail from {sender}. Read it with "
        f'read_mail {{"id": "{path}"}}.'
    )


# The configuration snippets of `bench mcp --print-config AGENT` (docs/mcp.md, "Setup").
# Each agent starts `bench mcp` inside its session, so the server has the session's
# environment: what it needs of it (Codex passes a server only the variables it names).
SESSION_ENV = ("BENCH_DIR", "BENCH_TOKEN", "BENCH_SESSION", "BENCH_HANDLE")

AGENTS = ("claude", "codex", "pi")


def snippet(agent: str, command: str = "bench") -> tuple[str, str]:
    """(where it goes, the text to paste) for `agent`'s MCP configuration.

    The text is the file's content exactly (valid JSON or TOML); the note says which
    file and what to know, and goes to stderr, so `> .mcp.json` works.
    """
    if agent == "claude":
        cfg = {"mcpServers": {"bench": {"type": "stdio", "command": command, "args": ["mcp"]}}}
        return (
            "Claude Code: .mcp.json in the project directory (or mcpServers in "
            f"~/.claude.json, or: claude mcp add bench -- {command} mcp). The tools show up "
            "as mcp__bench__send_mail, mcp__bench__read_mail, ...",
            json.dumps(cfg, indent=2) + "\n",
        )
    if agent == "codex":
        env_vars = ", ".join(json.dumps(v) for v in SESSION_ENV)
        return (
            "Codex: ~/.codex/config.toml (or $CODEX_HOME/config.toml). Codex passes a "
            "server only the variables named in env_vars, so bench's are listed.",
            "[mcp_servers.bench]\n"
            f"command = {json.dumps(command)}\n"
            'args = ["mcp"]\n'
            f"env_vars = [{env_vars}]\n",
        )
    if agent == "pi":
        cfg = {"mcpServers": {"bench": {"command": command, "args": ["mcp"]}}}
        return (
            "pi has no MCP client of its own (by design: it works through command-line "
            "tools), so in pi use the bench CLI from its bash tool (skills/mail/SKILL.md). "
            "An MCP extension for pi that reads the common mcpServers format takes the "
            "entry below; it must start the server inside the session.",
            json.dumps(cfg, indent=2) + "\n",
        )
    raise ValueError(f"no MCP configuration for {agent!r}; known: {', '.join(AGENTS)}")
