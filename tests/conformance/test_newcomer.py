"""A newcomer's round: the wording, kind prefixes and address hints they tripped over.

Each test does what the trial did, with a real daemon and the real CLI (and `bench mcp`).
"""

import json

import pytest

from tests.conftest import assert_refused


def events(daemon, *args: str) -> list[dict]:
    r = daemon.bench("events", *args, "--json")
    assert r.rc == 0, r
    return [json.loads(line) for line in r.out.splitlines() if line.strip()]


def test_mail_list_footers_count_messages(daemon):
    daemon.ok("mail", "send", "alice", "-m", "one")
    assert daemon.bench("mail", "list", "--handle", "alice").out.splitlines()[-1] == (
        "1 unread message for alice"
    )
    out = daemon.bench("mail", "list", "--handle", "alice", "--state", "all").out
    assert out.splitlines()[-1] == "1 message for alice"
    for i in range(2):
        daemon.ok("mail", "send", "alice", "-m", f"more {i}")
    out = daemon.bench("mail", "list", "--handle", "alice", "--limit", "2").out
    assert out.splitlines()[-1].startswith("2 of 3 unread messages for alice; more: ")


def test_mail_search_has_a_header_row(daemon):
    daemon.ok("mail", "send", "bob", "-s", "hello", "-m", "a wombat")
    lines = daemon.bench("mail", "search", "wombat").out.splitlines()
    assert lines[0].split() == ["ID", "TO", "STATE", "FROM", "SUBJECT"]
    row = lines[1].split()
    assert row[1:] == ["bob", "unread", "operator", "hello"], lines
    assert lines[-1] == "1 match"


def test_events_take_a_kind_prefix(daemon):
    daemon.ok(
        "spawn", "--name", "w", "--mail", "-", "--reply-to", "operator", "--", "true", input="task"
    )
    daemon.wait_event("job/settled")
    kinds = {e["kind"] for e in events(daemon, "--kind", "job/")}
    assert kinds and all(k.startswith("job/") for k in kinds), kinds
    assert "job/settled" in kinds
    exact = {e["kind"] for e in events(daemon, "--kind", "job/settled")}
    assert exact == {"job/settled"}
    r = daemon.bench("events", "--kind", "jb/", "--json")
    err = assert_refused(r, "bad-request")
    assert "job/" in err["message"] and "mail/" in err["message"]


@pytest.mark.parametrize(
    "to,meant",
    [("Bob", "bob"), ("Carol@node2", "carol@node2"), ("carol@Node2", "carol@node2")],
)
def test_an_address_in_the_wrong_case_gets_a_hint(daemon, to, meant):
    daemon.ok("mail", "send", "bob", "-m", "so bob's mailbox exists")
    r = daemon.bench("mail", "send", to, "-m", "hi")
    assert r.rc == 1 and f"(did you mean {meant}?)" in r.err, r


def test_mcp_send_mail_to_a_handle_in_the_wrong_case_gets_a_hint(daemon):
    pytest.importorskip("mcp", reason="bench mcp needs the mcp extra")
    from tests.conformance.test_mcp import with_mcp

    daemon.ok("mail", "send", "dan", "-m", "so dan's mailbox exists")

    async def scenario(c):
        return await c.call_tool("send_mail", {"to": "Dan", "body": "hi"})

    result = with_mcp(daemon.dir, scenario)
    assert result.is_error
    err = result.structured_content["error"]
    assert err["code"] == "bad-handle" and "(did you mean dan?)" in err["message"], err


def test_a_wake_retires_the_mail_as_the_readme_says(daemon):
    from tests.conftest import spawn_standin

    spawn_standin(daemon, "alice")
    sent = daemon.ok("mail", "send", "alice", "-m", "wake up")
    daemon.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert daemon.bench("mail", "list", "--handle", "alice").out.strip() == (
        "no unread mail for alice"
    )
    listed = daemon.ok("mail", "list", "--handle", "alice", "--state", "all")["messages"]
    assert [(x["mail_id"], x["state"]) for x in listed] == [(sent["mail_id"], "read")]
