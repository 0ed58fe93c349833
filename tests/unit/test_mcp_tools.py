"""The pure parts of `bench mcp`: argument checks, message references, snippets."""

import json
import tomllib

import pytest

from bench_mcp import tools
from bench_wire.errors import WireError


def code(fn, *args):
    with pytest.raises(WireError) as e:
        fn(*args)
    assert e.value.message
    return e.value.code


def test_every_tool_has_a_description_and_an_object_schema():
    assert set(tools.TOOLS) == {
        "send_mail",
        "list_mail",
        "read_mail",
        "search_mail",
        "reply",
        "thread",
        "report",
        "whoami",
        "mail_status",
        "approve",
        "deny",
        "wait_for_mail",
    }
    for name, (desc, schema) in tools.TOOLS.items():
        assert desc.endswith(".") and len(desc) > 40, name
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for prop, spec in schema["properties"].items():
            assert spec["type"] in ("string", "integer", "array"), (name, prop)
            assert spec.get("description"), (name, prop)
        assert set(schema.get("required", [])) <= set(schema["properties"])


def test_check_args_accepts_what_the_schema_allows():
    assert tools.check_args("send_mail", {"to": "bob", "body": ""}) == {"to": "bob", "body": ""}
    assert tools.check_args("send_mail", {"to": "b", "body": "x", "reply_to": "c"})["reply_to"] == [
        "c"
    ]
    assert tools.check_args("list_mail", {"state": "all", "limit": 5, "cursor": None}) == {
        "state": "all",
        "limit": 5,
    }
    assert tools.check_args("whoami", None) == {}
    assert tools.check_args("read_mail", {}) == {}


@pytest.mark.parametrize(
    "tool,args,why",
    [
        ("send_mail", {"to": "bob"}, "needs the argument 'body'"),
        ("send_mail", {"to": "bob", "body": "x", "from": "alice"}, "has no argument 'from'"),
        ("send_mail", {"to": 7, "body": "x"}, "'to' must be a string"),
        ("send_mail", {"to": "b", "body": "x", "reply_to": ["c", 1]}, "list of strings"),
        ("list_mail", {"limit": True}, "'limit' must be an integer"),
        ("list_mail", {"limit": 2.5}, "'limit' must be an integer"),
        ("list_mail", {"state": "new"}, "one of unread, read, all"),
        ("whoami", {"handle": "x"}, "takes no arguments"),
        ("drop_mail", {}, "there is no tool 'drop_mail'"),
    ],
)
def test_check_args_refuses_with_a_sentence(tool, args, why):
    with pytest.raises(WireError) as e:
        tools.check_args(tool, args)
    assert e.value.code == "bad-request" and why in e.value.message


def test_message_ref_takes_an_id_or_a_wake_path():
    mid = "20261130T045611.123Z-0001"
    assert tools.message_ref(mid) == (None, mid)
    assert tools.message_ref(f" {mid}\n") == (None, mid)
    assert tools.message_ref(f"/tmp/b/mail/alice/read/{mid}.md") == ("alice", mid)
    assert tools.message_ref(f"mail/bob/inbox/{mid}.md") == ("bob", mid)
    assert code(tools.message_ref, "/etc/passwd") == "bad-id"
    assert code(tools.message_ref, f"/tmp/b/mail/alice/tmp/{mid}.md") == "bad-id"
    assert code(tools.message_ref, "x.md") == "bad-id"


def test_listing_text_says_how_to_get_more():
    a = {
        "handle": "alice",
        "total": 3,
        "truncated": True,
        "cursor": "C1",
        "messages": [
            {"mail_id": "C1", "state": "unread", "from": "bob", "size": 9, "subject": "hi"}
        ],
    }
    text = tools.listing_text(a, "unread")
    assert text.splitlines()[0].startswith("C1  unread  from bob")
    assert "1 of 3 unread messages for alice" in text and "cursor 'C1'" in text


def test_wake_prompt_names_the_call_that_answers_the_line():
    assert tools.wake_prompt() == tools.WAKE_PROMPT
    text = tools.wake_prompt("You have mail from bob: /d/mail/al/read/1.md")
    assert text.endswith('read_mail {"id": "/d/mail/al/read/1.md"}.')
    assert "is not a wake line" in tools.wake_prompt("hello")


def test_error_text_is_the_sentence_and_the_code():
    assert tools.error_text(WireError("no-unread", "alice has no unread mail")) == (
        "alice has no unread mail [no-unread]"
    )


def test_config_snippets_parse():
    note, text = tools.snippet("claude")
    assert json.loads(text)["mcpServers"]["bench"] == {
        "type": "stdio",
        "command": "bench",
        "args": ["mcp"],
    }
    note, text = tools.snippet("codex", "/opt/bench/bin/bench")
    server = tomllib.loads(text)["mcp_servers"]["bench"]
    assert server["command"] == "/opt/bench/bin/bench"
    assert server["env_vars"] == list(tools.SESSION_ENV)
    note, text = tools.snippet("pi")
    assert "no MCP client" in note and json.loads(text)["mcpServers"]["bench"]["args"] == ["mcp"]
    with pytest.raises(ValueError):
        tools.snippet("aider")
