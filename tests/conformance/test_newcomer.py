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


def test_mail_list_footers_count_messages(shared, who):
    shared.ok("mail", "send", who, "-m", "one")
    assert shared.bench("mail", "list", "--handle", who).out.splitlines()[-1] == (
        f"1 unread message for {who}"
    )
    out = shared.bench("mail", "list", "--handle", who, "--state", "all").out
    assert out.splitlines()[-1] == f"1 message for {who}"
    for i in range(2):
        shared.ok("mail", "send", who, "-m", f"more {i}")
    out = shared.bench("mail", "list", "--handle", who, "--limit", "2").out
    assert out.splitlines()[-1].startswith(f"2 of 3 unread messages for {who}; more: ")


def test_mail_search_has_a_header_row(shared, who):
    shared.ok("mail", "send", who, "-s", "hello", "-m", "a wombat")
    lines = shared.bench("mail", "search", "wombat").out.splitlines()
    assert lines[0].split() == ["ID", "TO", "STATE", "FROM", "SUBJECT"]
    row = lines[1].split()
    assert row[1:] == [who, "unread", "operator", "hello"], lines
    assert lines[-1] == "1 match"


def test_events_take_a_kind_prefix(shared, who):
    shared.ok(
        "spawn", "--name", who, "--mail", "-", "--reply-to", "operator", "--", "true", input="task"
    )
    shared.wait_event("job/settled", lambda e: e["handle"] == who)
    kinds = {e["kind"] for e in events(shared, "--kind", "job/")}
    assert kinds and all(k.startswith("job/") for k in kinds), kinds
    assert "job/settled" in kinds
    exact = {e["kind"] for e in events(shared, "--kind", "job/settled")}
    assert exact == {"job/settled"}
    r = shared.bench("events", "--kind", "jb/", "--json")
    err = assert_refused(r, "bad-request")
    assert "job/" in err["message"] and "mail/" in err["message"]


@pytest.mark.parametrize(
    "to,meant",
    [("Bob", "bob"), ("Carol@node2", "carol@node2"), ("carol@Node2", "carol@node2")],
)
def test_an_address_in_the_wrong_case_gets_a_hint(shared, to, meant):
    shared.ok("mail", "send", "bob", "-m", "so bob's mailbox exists")
    r = shared.bench("mail", "send", to, "-m", "hi")
    assert r.rc == 1 and f"(did you mean {meant}?)" in r.err, r


def test_mcp_send_mail_to_a_handle_in_the_wrong_case_gets_a_hint(shared):
    pytest.importorskip("mcp", reason="bench mcp needs the mcp extra")
    from tests.conformance.test_mcp import with_mcp

    shared.ok("mail", "send", "dan", "-m", "so dan's mailbox exists")

    async def scenario(c):
        return await c.call_tool("send_mail", {"to": "Dan", "body": "hi"})

    result = with_mcp(shared.dir, scenario)
    assert result.is_error
    err = result.structured_content["error"]
    assert err["code"] == "bad-handle" and "(did you mean dan?)" in err["message"], err


def test_a_wake_retires_the_mail_as_the_readme_says(shared, who):
    from tests.conftest import spawn_standin

    spawn_standin(shared, who)
    sent = shared.ok("mail", "send", who, "-m", "wake up")
    shared.wait_event("agent/woken", lambda e: e["mail_id"] == sent["mail_id"])
    assert shared.bench("mail", "list", "--handle", who).out.strip() == (
        f"no unread mail for {who}"
    )
    listed = shared.ok("mail", "list", "--handle", who, "--state", "all")["messages"]
    assert [(x["mail_id"], x["state"]) for x in listed] == [(sent["mail_id"], "read")]
