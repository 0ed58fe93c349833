"""`bench mcp` end to end: the `mcp` client library talks to the real `bench mcp` process
over stdio, against a real daemon, as the operator and as sessions.

Sessions are real (spawned into the daemon's ptys); the MCP server gets a session's
BENCH_TOKEN in its environment, as an agent's MCP config hands it over.
"""

import json
import os
import sys
import threading

import pytest

from tests.conftest import BENCH, ROOT, wait_for

pytest.importorskip("mcp", reason="the MCP SDK (the bench[mcp] extra) is not installed")

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

INPTY = os.path.join(ROOT, "tests", "reliability", "inpty.py")
CALLER = os.path.join(ROOT, "tests", "standin", "mcp_caller.py")
TOOLS = {
    "send_mail",
    "list_mail",
    "read_mail",
    "search_mail",
    "reply",
    "thread",
    "report",
    "whoami",
    "mail_status",
    "wait_for_mail",
    "approve",
    "deny",
}


def server_params(bench_dir: str, token: str | None = None, **env) -> StdioServerParameters:
    e = {"BENCH_DIR": bench_dir, **env}
    if token:
        e["BENCH_TOKEN"] = token
    return StdioServerParameters(command=BENCH, args=["mcp"], env=e)


def with_mcp(bench_dir: str, scenario, token: str | None = None, **env):
    """Run `await scenario(client)` against a fresh `bench mcp` process; its result."""

    async def main():
        async with Client(server_params(bench_dir, token, **env)) as client:
            return await scenario(client)

    return anyio.run(main)


def ok(result) -> dict:
    assert not result.is_error, result.content
    assert result.content and result.content[0].text  # the short text for the model
    return result.structured_content


def refused(result) -> str:
    """The bench code of a tool error; its text carries the sentence and the code."""
    assert result.is_error, result
    err = result.structured_content["error"]
    assert err["message"] and err["code"]
    assert result.content[0].text == f"{err['message']} [{err['code']}]"
    return err["code"]


def session(daemon, tmp_path, name: str, *spawn_args: str) -> dict:
    """A live session `name` (a process that records its env and stays): handle, token."""
    rq, out = tmp_path / f"{name}.req.json", tmp_path / f"{name}.out.json"
    rq.write_text("[]")
    daemon.ok(
        "spawn",
        "--name",
        name,
        *spawn_args,
        "--",
        sys.executable,
        INPTY,
        str(rq),
        str(out),
        "--stay",
    )
    wait_for(lambda: out.exists(), 30, f"{name} to start")
    rec = json.loads(out.read_text())
    assert rec["handle"] == name and rec["token"]
    return rec


# ------------------------------------------------------------------ what is offered


def test_tools_resources_and_the_wake_prompt_are_listed(shared):
    async def scenario(c):
        tools = (await c.list_tools()).tools
        res = (await c.list_resources()).resources
        tpl = (await c.list_resource_templates()).resource_templates
        prompts = (await c.list_prompts()).prompts
        prompt = await c.get_prompt(
            "wake", {"line": "You have mail from bob: /b/mail/al/read/X.md"}
        )
        return tools, res, tpl, prompts, prompt

    tools, res, tpl, prompts, prompt = with_mcp(shared.dir, scenario)
    assert {t.name for t in tools} == TOOLS
    for t in tools:
        assert len(t.description) > 40, t.name
        assert t.input_schema["type"] == "object"
        assert t.input_schema["additionalProperties"] is False
        assert "from" not in t.input_schema["properties"], "no tool takes a sender"
    by_name = {t.name: t for t in tools}
    assert by_name["send_mail"].input_schema["required"] == ["to", "body"]
    assert by_name["reply"].input_schema["required"] == ["id", "body"]
    assert by_name["list_mail"].annotations.read_only_hint is True
    assert by_name["send_mail"].annotations.read_only_hint is False
    assert [str(r.uri) for r in res] == ["bench://mail/inbox"]
    assert [t.uri_template for t in tpl] == ["bench://mail/{id}"]
    assert [p.name for p in prompts] == ["wake"]
    text = prompt.messages[0].content.text
    assert "You have mail from <sender>: <path>" in text
    assert 'read_mail {"id": "/b/mail/al/read/X.md"}' in text


# ------------------------------------------------------------------ the operator


def test_every_mail_tool_as_the_operator(daemon):
    async def scenario(c):
        me = ok(await c.call_tool("whoami", {}))
        sent = ok(
            await c.call_tool(
                "send_mail",
                {
                    "to": "operator",
                    "body": "note to self\n",
                    "subject": "todo",
                    "key": "k-1",
                    "reply_to": "alice",
                },
            )
        )
        again = ok(
            await c.call_tool(
                "send_mail",
                {
                    "to": "operator",
                    "body": "note to self\n",
                    "subject": "todo",
                    "key": "k-1",
                    "reply_to": "alice",
                },
            )
        )
        unread = ok(await c.call_tool("list_mail", {}))
        inbox = await c.read_resource("bench://mail/inbox")
        got = ok(await c.call_tool("read_mail", {}))
        after = ok(await c.call_tool("list_mail", {"state": "read", "limit": 10}))
        answer = ok(await c.call_tool("reply", {"id": sent["mail_id"], "body": "done"}))
        by_uri = await c.read_resource(f"bench://mail/{sent['mail_id']}")
        found = ok(await c.call_tool("search_mail", {"query": "self", "limit": 5}))
        return me, sent, again, unread, inbox, got, after, answer, by_uri, found

    me, sent, again, unread, inbox, got, after, answer, by_uri, found = with_mcp(
        daemon.dir, scenario
    )
    # search_mail: metadata and a snippet, never the body; nothing retired.
    (hit,) = found["hits"]
    assert hit["mail_id"] == sent["mail_id"] and "self" in hit["snippet"]
    assert "body" not in hit
    assert me["handle"] == "operator" and me["session"] is None
    assert me["bench_dir"] == daemon.dir and me["unread"] == 0
    assert sent["to"] == "operator" and sent["live"] is False and not sent["duplicate"]
    assert again["duplicate"] is True and again["mail_id"] == sent["mail_id"]
    assert [m["mail_id"] for m in unread["messages"]] == [sent["mail_id"]]
    assert json.loads(inbox.contents[0].text)["messages"][0]["mail_id"] == sent["mail_id"]
    assert got["mail_id"] == sent["mail_id"] and got["body"] == "note to self\n"
    assert got["from"] == "operator" and got["reply_to"] == ["alice"] and got["retired"]
    assert [m["mail_id"] for m in after["messages"]] == [sent["mail_id"]]
    # The reply honours the message's reply-to: it goes to alice, not back to the sender.
    (r,) = answer["sent"]
    assert r["to"] == "alice" and answer["in_reply_to"] == sent["mail_id"]
    reply = daemon.ok("mail", "read", r["mail_id"], "--handle", "alice")
    assert reply["subject"] == "Re: todo" and reply["in_reply_to"] == sent["mail_id"]
    assert reply["body"] == "done" and reply["from"] == "operator"
    assert "note to self" in by_uri.contents[0].text
    # The file on disk is the same message the CLI sees.
    assert daemon.ok("mail", "read", sent["mail_id"])["body"] == "note to self\n"


# ------------------------------------------------------------------ sessions and identity


def test_a_session_is_itself_and_reads_only_its_own_mail(shared, who, tmp_path):
    ah, bh = who + "a", who + "b"
    alice = session(shared, tmp_path, ah)
    bob = session(shared, tmp_path, bh)
    secret = shared.ok("mail", "send", ah, "-s", "for alice", "-m", "alice's secret")

    async def as_alice(c):
        me = ok(await c.call_tool("whoami", {}))
        sent = ok(
            await c.call_tool("send_mail", {"to": bh, "subject": "hi bob", "body": "number 7"})
        )
        return me, sent

    me, sent = with_mcp(shared.dir, as_alice, alice["token"])
    assert me["handle"] == ah and me["session"] == alice["session"]
    assert me["unread"] == 1
    assert sent["to"] == bh and sent["live"] is True

    alice_path = os.path.join(shared.dir, "mail", ah, "inbox", secret["mail_id"] + ".md")

    async def as_bob(c):
        listing = ok(await c.call_tool("list_mail", {"state": "all"}))
        wake_path = os.path.join(shared.dir, "mail", bh, "inbox", sent["mail_id"] + ".md")
        got = ok(await c.call_tool("read_mail", {"id": wake_path}))
        answer = ok(await c.call_tool("reply", {"id": sent["mail_id"], "body": "number 8"}))
        by_id = refused(await c.call_tool("read_mail", {"id": secret["mail_id"]}))
        by_path = refused(await c.call_tool("read_mail", {"id": alice_path}))
        reply_other = refused(await c.call_tool("reply", {"id": alice_path, "body": "x"}))
        try:
            await c.read_resource(f"bench://mail/{secret['mail_id']}")
            resource = None
        except MCPError as err:
            resource = err.error.data
        return listing, got, answer, by_id, by_path, reply_other, resource

    listing, got, answer, by_id, by_path, reply_other, resource = with_mcp(
        shared.dir, as_bob, bob["token"]
    )
    assert [m["mail_id"] for m in listing["messages"]] == [sent["mail_id"]]
    assert listing["handle"] == bh
    assert got["from"] == ah and got["body"] == "number 7"  # the daemon said who sent it
    (r,) = answer["sent"]
    assert r["to"] == ah
    # Alice's mail stays hers: by id it is not in bob's mailbox, by path it is forbidden.
    assert by_id == "no-such-message"
    assert by_path == "forbidden" and reply_other == "forbidden"
    assert resource["code"] == "no-such-message"
    assert shared.ok("mail", "list", "--handle", ah)["total"] == 2  # secret + reply: unread
    reply = shared.ok("mail", "read", r["mail_id"], "--handle", ah)
    assert reply["from"] == bh and reply["subject"] == "Re: hi bob"


def test_report_through_mcp_reaches_the_job_owner(daemon, tmp_path):
    task = tmp_path / "task.md"
    task.write_text("count the files")
    child = session(daemon, tmp_path, "child", "--mail", str(task), "--reply-to", "operator")
    loner = session(daemon, tmp_path, "loner")

    async def as_child(c):
        return ok(await c.call_tool("report", {"content": "42 files, via MCP"}))

    async def as_loner(c):
        return refused(await c.call_tool("report", {"content": "x"}))

    async def as_operator(c):
        return refused(await c.call_tool("report", {"content": "x"}))

    rep = with_mcp(daemon.dir, as_child, child["token"])
    assert rep["session"] == child["session"] and rep["bytes"] == len("42 files, via MCP")
    assert with_mcp(daemon.dir, as_loner, loner["token"]) == "no-job"
    assert with_mcp(daemon.dir, as_operator) == "not-in-session"
    daemon.ok("kill", "child")
    daemon.wait_event("job/settled", lambda e: e["handle"] == "child")
    mail = wait_for(lambda: daemon.ok("mail", "list")["messages"], 30, "the job's reply")
    body = daemon.ok("mail", "read", mail[0]["mail_id"])["body"]
    assert "42 files, via MCP" in body and "agentId: child" in body


# ------------------------------------------------------------------ errors


def test_errors_carry_benchs_code_and_sentence(daemon):
    async def scenario(c):
        codes = {
            "unknown argument": await c.call_tool(
                "send_mail", {"to": "b", "body": "x", "from": "b"}
            ),
            "missing": await c.call_tool("send_mail", {"to": "b"}),
            "wrong type": await c.call_tool("list_mail", {"limit": "ten"}),
            "bool is no int": await c.call_tool("list_mail", {"limit": True}),
            "enum": await c.call_tool("list_mail", {"state": "new"}),
            "limit": await c.call_tool("list_mail", {"limit": 0}),
            "cursor": await c.call_tool("list_mail", {"cursor": "nope"}),
            "handle": await c.call_tool("send_mail", {"to": "Bad Handle!", "body": "x"}),
            "subject": await c.call_tool(
                "send_mail", {"to": "b", "body": "x", "subject": "two\nlines"}
            ),
            "empty": await c.call_tool("read_mail", {}),
            "id": await c.call_tool("read_mail", {"id": "../../etc/passwd"}),
            "unknown id": await c.call_tool("read_mail", {"id": "20261130T045611.123Z-0001"}),
            "unknown tool": await c.call_tool("delete_mail", {}),
        }
        try:
            await c.read_resource("bench://mail/a/b")
            resource = None
        except MCPError as err:
            resource = err.error
        still = ok(await c.call_tool("whoami", {}))
        return {k: refused(v) for k, v in codes.items()}, resource, still

    codes, resource, still = with_mcp(daemon.dir, scenario)
    assert codes == {
        "unknown argument": "bad-request",
        "missing": "bad-request",
        "wrong type": "bad-request",
        "bool is no int": "bad-request",
        "enum": "bad-request",
        "limit": "bad-limit",
        "cursor": "bad-cursor",
        "handle": "bad-handle",
        "subject": "bad-subject",
        "empty": "no-unread",
        "id": "bad-id",
        "unknown id": "no-such-message",
        "unknown tool": "bad-request",
    }
    assert resource.data["code"] == "bad-request" and "[bad-request]" in resource.message
    assert still["handle"] == "operator"  # the server kept serving after every refusal
    assert daemon.ok("mail", "list", "--state", "all", "--handle", "b")["total"] == 0


def test_no_daemon_is_an_error_not_a_crash(bench_dir):
    async def scenario(c):
        first = refused(await c.call_tool("whoami", {}))
        second = refused(await c.call_tool("send_mail", {"to": "bob", "body": "x"}))
        tools = (await c.list_tools()).tools
        return first, second, len(tools)

    assert with_mcp(bench_dir, scenario) == ("no-daemon", "no-daemon", len(TOOLS))


def test_a_forged_token_is_refused(shared, who):
    async def scenario(c):
        return refused(await c.call_tool("send_mail", {"to": who, "body": "x"}))

    assert with_mcp(shared.dir, scenario, "forged-token") == "bad-token"
    assert shared.ok("mail", "list", "--handle", who, "--state", "all")["total"] == 0


# ------------------------------------------------------------------ a busy daemon


def test_tool_calls_on_a_busy_daemon(daemon, tmp_path):
    """Eight CLI-speed senders keep the daemon's committer busy while twenty concurrent
    MCP calls send: every call is answered, and each message is delivered exactly once."""
    from bench_wire.client import Client, request
    from bench_wire.errors import WireError

    alice = session(daemon, tmp_path, "alice")
    stop = threading.Event()
    counts = []

    def load(n: int) -> None:
        sent = 0
        with Client(daemon.dir) as conn:
            while not stop.is_set():
                try:
                    conn.call(request("mail/send", {"to": f"load{n}", "body": "x" * 200}))
                    sent += 1
                except WireError as err:
                    # The operator's limits may answer a fast loop: still load.
                    if err.code not in ("rate-limited", "mailbox-full"):
                        raise
        counts.append(sent)

    threads = [threading.Thread(target=load, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()

    async def scenario(c):
        results = [None] * 20

        async def one(i):
            results[i] = await c.call_tool(
                "send_mail", {"to": "bob", "body": f"busy {i}", "key": f"busy-{i}"}
            )

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        listing = ok(await c.call_tool("list_mail", {"state": "all"}))
        return [ok(r) for r in results], listing

    try:
        wait_for(
            lambda: daemon.ok("mail", "list", "--handle", "load0")["total"] > 20,
            30,
            "the load to start",
        )
        sent, listing = with_mcp(daemon.dir, scenario, alice["token"])
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert len(counts) == 8 and min(counts) > 0
    assert sorted(s["key"] for s in sent) == sorted(f"busy-{i}" for i in range(20))
    assert all(s["to"] == "bob" and not s["duplicate"] for s in sent)
    bobs = daemon.ok("mail", "list", "--handle", "bob", "--state", "all", "--limit", "500")
    assert bobs["total"] == 20
    assert {m["from"] for m in bobs["messages"]} == {"alice"}
    assert listing["handle"] == "alice"


def test_the_connection_limit_is_a_clear_error(make_daemon):
    from bench_wire.client import Client

    d = make_daemon("--max-connections", "2")
    held = [Client(d.dir), Client(d.dir)]
    try:
        # The daemon answers a connection it has accepted; make sure both are counted.
        for c in held:
            c.call({"verb": "hello"})

        async def scenario(c):
            return refused(await c.call_tool("whoami", {}))

        assert with_mcp(d.dir, scenario) == "too-many-connections"
    finally:
        for c in held:
            c.close()
    # Once the daemon has seen the two close, there is room again.
    wait_for(lambda: d.call({"verb": "hello"}).get("ok"), 30, "a free connection slot")

    async def after(c):
        return ok(await c.call_tool("whoami", {}))

    assert with_mcp(d.dir, after)["handle"] == "operator"


# ------------------------------------------------------------------ the command


def test_print_config_snippets_are_valid_files(shared):
    import tomllib

    claude = shared.bench("mcp", "--print-config", "claude")
    codex = shared.bench("mcp", "--print-config", "codex")
    pi = shared.bench("mcp", "--print-config", "pi")
    assert claude.rc == codex.rc == pi.rc == 0
    cfg = json.loads(claude.out)["mcpServers"]["bench"]
    assert cfg["command"] == "bench" and cfg["args"] == ["mcp"]
    assert ".mcp.json" in claude.err and "mcp__bench__read_mail" in claude.err
    toml = tomllib.loads(codex.out)["mcp_servers"]["bench"]
    assert toml["args"] == ["mcp"] and {"BENCH_DIR", "BENCH_TOKEN"} <= set(toml["env_vars"])
    assert "no MCP client" in pi.err and json.loads(pi.out)["mcpServers"]["bench"]
    bad = shared.bench("mcp", "--print-config", "aider")
    assert bad.rc == 2 and "aider" in bad.err


def test_without_the_sdk_bench_mcp_says_how_to_install_it(shared, tmp_path):
    # A stand-in `mcp` package that fails to import, first on the path.
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text("raise ImportError('absent', name='mcp')\n")
    r = shared.bench("mcp", env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert r.rc == 2, r
    assert "pip install 'bench[mcp]'" in r.err and "[mcp-missing]" in r.err
    assert "Traceback" not in r.err


# ------------------------------------------------------------------ started inside a session


@pytest.mark.parametrize("no_token", [False, True], ids=["token", "ancestry"])
def test_started_inside_a_session_the_server_is_that_session(daemon, tmp_path, no_token):
    """As an agent starts it: `bench mcp` a child of the session's program. Without
    BENCH_TOKEN (an agent that forwards only some variables) the daemon still knows the
    session from the process ancestry."""
    calls, out = tmp_path / "calls.json", tmp_path / "out.json"
    calls.write_text(
        json.dumps(
            [
                ["whoami", {}],
                ["send_mail", {"to": "bob", "body": "from inside"}],
                ["list_mail", {"state": "all"}],
            ]
        )
    )
    argv = [sys.executable, CALLER, str(calls), str(out)] + (["--no-token"] if no_token else [])
    s = daemon.ok("spawn", "--name", "alice", "--", *argv)
    wait_for(lambda: out.exists(), 60, "the in-session MCP calls")
    me, sent, listing = json.loads(out.read_text())
    assert not (me["error"] or sent["error"] or listing["error"]), (me, sent, listing)
    assert me["data"]["handle"] == "alice" and me["data"]["session"] == s["session"]
    assert listing["data"]["handle"] == "alice"
    got = daemon.ok("mail", "read", sent["data"]["mail_id"], "--handle", "bob")
    assert got["from"] == "alice" and got["body"] == "from inside"
