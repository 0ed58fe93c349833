"""A wake's retirement and its `agent/woken` are one commit (issue 40, defect 2).

The wake moves the message to read/ and logs agent/woken together, before the line is
pasted; whatever ends the session or the daemon after that (a kill, the program's own
exit, a daemon stop during the paste settle), the files, the delivery state and the
event log agree. A long --paste-settle holds the wake between its paste and its Enter,
so each interleaving is met on purpose, not by luck.
"""

import os

from tests.conftest import standin_argv

SETTLE = "30"  # far longer than any test step: the wake is still settling throughout


def _agree(d, handle: str, mail_id: str, session: str) -> None:
    """Files, state and log all say: retired by this session's wake."""
    assert os.path.exists(os.path.join(d.dir, "mail", handle, "read", mail_id + ".md"))
    assert not os.path.exists(os.path.join(d.dir, "mail", handle, "inbox", mail_id + ".md"))
    woken = [e for e in d.events(kind="agent/woken") if e["mail_id"] == mail_id]
    assert [e["session"] for e in woken] == [session]
    states = [s["state"] for s in d.ok("mail", "status", mail_id)["states"]]
    assert "woken" in states, states
    listed = d.ok("mail", "list", "--handle", handle, "--state", "all")["messages"]
    assert [m["state"] for m in listed if m["mail_id"] == mail_id] == ["read"]


def _settling(d, handle: str, argv: list[str]) -> tuple[str, str]:
    """Spawn, send, and return (session, mail id) once the wake has retired the mail
    (it is then inside its paste settle)."""
    s = d.ok("spawn", "--name", handle, "--", *argv)
    mail_id = d.ok("mail", "send", handle, "-m", "x")["mail_id"]
    read = os.path.join(d.dir, "mail", handle, "read", mail_id + ".md")
    d.wait_until(lambda: os.path.exists(read), 30, "the wake's retirement")
    return s["session"], mail_id


def test_a_kill_during_the_paste_settle(make_daemon):
    d = make_daemon("--paste-settle", SETTLE)
    sid, mail_id = _settling(d, "alice", standin_argv())
    d.ok("kill", "alice")
    d.wait_event("session/exited", lambda e: e["session"] == sid)
    _agree(d, "alice", mail_id, sid)


def test_the_program_exits_on_the_paste(make_daemon):
    d = make_daemon("--paste-settle", SETTLE)
    # Exits at the first byte it is given: during the wake's settle, before its Enter.
    argv = ["bash", "-c", 'printf "ready> "; read -rsn1 _; exit 3']
    sid, mail_id = _settling(d, "carol", argv)
    exited = d.wait_event("session/exited", lambda e: e["session"] == sid)
    assert exited["exit"] == 3
    _agree(d, "carol", mail_id, sid)


def test_a_daemon_stop_during_the_paste_settle(make_daemon):
    d = make_daemon("--paste-settle", SETTLE)
    sid, mail_id = _settling(d, "bob", standin_argv())
    d.stop()
    d.start()
    _agree(d, "bob", mail_id, sid)
