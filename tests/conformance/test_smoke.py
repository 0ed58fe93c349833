"""The shortest path through the real daemon and CLI: send, list, read."""


def test_send_list_read(daemon):
    sent = daemon.ok("mail", "send", "alice", "-s", "hello", "-m", "number 100")
    assert sent["to"] == "alice" and sent["live"] is False and sent["note"] == "no-live-session"
    listed = daemon.ok("mail", "list", "--handle", "alice")
    assert [m["mail_id"] for m in listed["messages"]] == [sent["mail_id"]]
    got = daemon.ok("mail", "read", "--handle", "alice")
    assert got["body"] == "number 100" and got["retired"] is True
    assert got["path"].endswith(f"/read/{sent['mail_id']}.md")
