"""Access control: who may reach the socket, who a request is from,
whose mailbox it may touch.

- the socket is 0600 in a 0700 BENCH_DIR; a peer with another uid is refused
  (peer-refused), checked by really connecting as `nobody`
- inside a session's pty, requests are that session's: a `from` field is never
  honoured; another mailbox can be neither listed nor read (forbidden); a message
  cannot be read by a path-like id (bad-id) nor by another mailbox's id
- a forged or stale BENCH_TOKEN is refused (bad-token) and writes nothing
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from tests.reliability.common import scan_mail
from tests.support.refusal import assert_refused

INPTY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inpty.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by nobody (the venv lives under /root)

# Connect, say hello, report what came back; stdlib only, runs as another user.
PEER_SCRIPT = r"""
import json, socket, sys
out = {"connect": "ok", "lines": [], "eof": False}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as err:
    out["connect"] = type(err).__name__
    print(json.dumps(out)); sys.exit(0)
try:
    s.sendall(b'{"verb":"hello","id":1}\n{"verb":"mail/list","handle":"bob","id":2}\n')
except OSError as err:
    out["send"] = type(err).__name__
buf = b""
while True:
    try:
        chunk = s.recv(65536)
    except OSError as err:
        out["recv"] = type(err).__name__
        break
    if not chunk:
        out["eof"] = True
        break
    buf += chunk
out["lines"] = [json.loads(x) for x in buf.splitlines()]
print(json.dumps(out))
"""


def as_nobody(sock_path: str) -> dict:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client under another uid (setpriv to nobody)")
    if shutil.which("setpriv") is None or not os.path.exists(SYSTEM_PYTHON):
        pytest.skip("needs setpriv and /usr/bin/python3 to run a client as nobody")
    r = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            SYSTEM_PYTHON,
            "-c",
            PEER_SCRIPT,
            sock_path,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def test_socket_0600_in_a_0700_dir(shared):
    d = shared
    st_dir = os.stat(d.dir)
    st_sock = os.stat(os.path.join(d.dir, "benchd.sock"))
    assert stat.S_IMODE(st_dir.st_mode) == 0o700, oct(st_dir.st_mode)
    assert stat.S_ISSOCK(st_sock.st_mode)
    assert stat.S_IMODE(st_sock.st_mode) == 0o600, oct(st_sock.st_mode)
    assert st_dir.st_uid == st_sock.st_uid == os.getuid()
    for name in ("events.jsonl", "benchd.lock"):
        mode = stat.S_IMODE(os.stat(os.path.join(d.dir, name)).st_mode)
        assert mode & 0o077 == 0, (name, oct(mode))


def test_another_uid_cannot_even_reach_the_socket(shared):
    out = as_nobody(os.path.join(shared.dir, "benchd.sock"))
    assert out["connect"] == "PermissionError", out


def test_another_uid_is_refused_by_peer_credentials(shared, who):
    d = shared
    sock = os.path.join(d.dir, "benchd.sock")
    d.ok("mail", "send", who, "-m", "private")
    # Open the way on purpose, so the daemon's own SO_PEERCRED check is what is tested.
    os.chmod(d.dir, 0o711)
    os.chmod(sock, 0o666)
    try:
        out = as_nobody(sock)
    finally:
        os.chmod(sock, 0o600)
        os.chmod(d.dir, 0o700)
    assert out["connect"] == "ok", out
    assert out["lines"], out
    first = out["lines"][0]
    assert_refused(first, "peer-refused")
    assert first["error"]["message"]
    assert len(out["lines"]) == 1, f"the refused peer got more than its refusal: {out}"
    assert out["eof"] or out.get("recv") == "ConnectionResetError", out
    assert d.call({"verb": "hello"})["ok"] is True
    assert stat.S_IMODE(os.stat(d.dir).st_mode) == 0o700


# ------------------------------------------------------------------ sessions


def run_in_session(
    d, tmp_path, name: str, reqs: list[dict], stay: bool = True, detach: bool = False
) -> dict:
    """Spawn session `name` running inpty.py with these requests; return its record."""
    tag = f"{name}-{os.urandom(4).hex()}"
    rq, out = tmp_path / f"{tag}.req.json", tmp_path / f"{tag}.out.json"
    rq.write_text(json.dumps(reqs))
    argv = [sys.executable, INPTY, str(rq), str(out)] + (["--stay"] if stay else [])
    argv += ["--detach"] if detach else []
    a = d.call({"verb": "session/spawn", "argv": argv, "name": name})
    assert a["ok"] is True, a
    d.wait_until(lambda: out.exists(), 30, f"{name}'s answers")
    rec = json.loads(out.read_text())
    assert rec["handle"] == name and rec["session"] == a["session"]
    return rec


def test_a_session_speaks_only_as_itself(shared, who, tmp_path):
    d = shared
    bob, carol = who + "b", who + "c"
    spawned = d.call({"verb": "session/spawn", "argv": ["sleep", "600"], "name": carol})
    assert spawned["ok"] is True
    seed = d.ok("mail", "send", bob, "-m", "bob's secret")
    mine = d.ok("mail", "send", who, "-m", "for alice")
    bob_id = seed["mail_id"]
    reqs = [
        {"verb": "hello"},
        {
            "verb": "mail/send",
            "to": bob,
            "body": "no token",
            "key": "f1",
            "from": "operator",
            "sender": "operator",
            "caller": "operator",
        },
        {
            "verb": "mail/send",
            "to": bob,
            "body": "with token",
            "key": "f2",
            "from": carol,
            "token": "$TOKEN",
        },
        {"verb": "mail/list", "handle": bob},
        {"verb": "mail/list", "handle": "operator", "state": "all"},
        {"verb": "mail/read", "handle": bob},
        {"verb": "mail/read", "handle": bob, "mail_id": bob_id},
        {"verb": "mail/read", "mail_id": bob_id},
        {"verb": "mail/read", "mail_id": f"../{bob}/inbox/{bob_id}"},
        {"verb": "mail/read", "mail_id": "/etc/passwd"},
        {"verb": "mail/read", "mail_id": f"../../mail/{bob}/inbox/{bob_id}.md"},
        {"verb": "mail/list", "handle": f"../{bob}"},
        {"verb": "mail/list"},
        {"verb": "mail/read", "mail_id": mine["mail_id"]},
        {"verb": "session/kill", "handle": carol},
        {"verb": "session/type", "handle": carol, "text": "x"},
        {"verb": "debug/fault", "point": "deliver", "count": 1},
        {"verb": "stop"},
        {"verb": "session/spawn", "argv": ["true"], "name": "operator"},
    ]
    rec = run_in_session(d, tmp_path, who, reqs)
    ans = rec["answers"]
    code = [a["error"]["code"] if not a["ok"] else "ok" for a in ans]

    assert ans[0]["caller"] == who, ans[0]
    # 1-2: no `from` is honoured, with or without the token.
    assert code[1] == code[2] == "ok", ans[1:3]
    scan = scan_mail(d.dir)
    by_key = {m["meta"]["key"]: m for m in scan.messages}
    assert by_key["f1"]["meta"]["from"] == who and by_key["f1"]["body"] == b"no token"
    assert by_key["f2"]["meta"]["from"] == who and by_key["f2"]["body"] == b"with token"
    assert [e["from"] for e in d.events(kind="mail/sent") if e["key"] in ("f1", "f2")] == [
        who,
        who,
    ]
    # 3-7: another's mailbox can be neither listed nor read, by handle or by id.
    assert code[3:7] == ["forbidden"] * 4, ans[3:7]
    assert code[7] == "no-such-message", ans[7]
    assert "secret" not in json.dumps(ans)
    # 8-11: path-like ids and handles.
    assert code[8:11] == ["bad-id"] * 3, ans[8:11]
    # Naming any other mailbox is refused before the name is even looked at.
    assert code[11] == "forbidden", ans[11]
    # 12-13: its own mailbox is fine.
    assert code[12] == "ok" and ans[12]["handle"] == who and ans[12]["total"] == 1
    assert code[13] == "ok" and ans[13]["body"] == "for alice"
    # 14-18: operator-only verbs (spawning included, whatever the name).
    assert code[14:19] == ["forbidden"] * 5, ans[14:19]
    # Nothing of bob's moved; the daemon still runs; carol still lives.
    (bob_msg,) = [m for m in scan_mail(d.dir).messages if m["meta"]["id"] == bob_id]
    assert bob_msg["state"] == "inbox"
    assert d.call({"verb": "hello"})["ok"] is True
    ps = d.call({"verb": "session/list"})
    assert {s["handle"]: s["state"] for s in ps["sessions"]}[carol] == "running"


def test_the_token_is_the_identity_outside_the_pty_too(shared, who, tmp_path):
    d = shared
    rec = run_in_session(d, tmp_path, who, [{"verb": "hello", "token": "$TOKEN"}])
    token = rec["token"]
    assert token and rec["answers"][0]["caller"] == who
    with d.connect() as c:
        a = c.call(
            {
                "verb": "mail/send",
                "to": who + "b",
                "body": "b",
                "key": "t1",
                "token": token,
                "from": "operator",
            }
        )
        h = c.call({"verb": "hello", "token": token})
        c.send({"verb": "mail/list", "handle": who + "b", "token": token})
        refused = c.recv()
    assert h["caller"] == who
    (msg,) = [m for m in scan_mail(d.dir).messages if m["meta"]["key"] == "t1"]
    assert msg["meta"]["from"] == who and msg["meta"]["id"] == a["mail_id"]
    assert_refused(refused, "forbidden")


@pytest.mark.parametrize("token", ["forged", "", "x" * 5000, "../../etc/passwd"])
def test_a_forged_token_is_refused_and_writes_nothing(shared, who, tmp_path, token):
    d = shared
    run_in_session(d, tmp_path, who, [{"verb": "hello"}])  # a live session exists
    # The whole state directory is counted: no session of this module sends by itself.
    before = len(scan_mail(d.dir).messages)
    with d.connect() as c:
        for req in (
            {"verb": "hello"},
            {"verb": "mail/send", "to": who + "b", "body": "x"},
            {"verb": "mail/list"},
            {"verb": "mail/read"},
        ):
            c.send({**req, "token": token})
            a = c.recv()
            if token == "":
                # An empty token: refused, or taken as no token (the operator); never a
                # session's identity.
                assert (not a["ok"] and a["error"]["code"] == "bad-token") or a["ok"], a
                continue
            assert_refused(a, "bad-token")
            assert a["error"]["message"]
    if token != "":
        assert len(scan_mail(d.dir).messages) == before


def test_a_stale_token_is_refused(shared, who, tmp_path):
    d = shared
    rec = run_in_session(d, tmp_path, who, [{"verb": "hello", "token": "$TOKEN"}], stay=False)
    d.wait_event("session/exited", lambda e: e["handle"] == who)
    before = len(scan_mail(d.dir).messages)
    with d.connect() as c:
        c.send({"verb": "mail/send", "to": who + "b", "body": "x", "token": rec["token"]})
        a = c.recv()
        c.send({"verb": "hello", "token": rec["token"]})
        h = c.recv()
    assert_refused(a, "bad-token")
    assert_refused(h, "bad-token")
    assert len(scan_mail(d.dir).messages) == before
    # A new session under the same handle gets a new secret; the old one stays dead.
    rec2 = run_in_session(d, tmp_path, who, [{"verb": "hello", "token": "$TOKEN"}])
    assert rec2["token"] != rec["token"]
    assert_refused(d.call({"verb": "hello", "token": rec["token"]}), "bad-token")


def test_a_sessions_child_in_a_new_process_session_is_not_the_operator(shared, who, tmp_path):
    """A process the session starts with setsid and without BENCH_TOKEN (no secret, no
    controlling pty) is still the session's descendant; it must not become `operator`
    and gain the operator's reach over every mailbox."""
    d = shared
    d.ok("mail", "send", who + "b", "-m", "bob's secret")
    rec = run_in_session(
        d,
        tmp_path,
        who,
        [
            {"verb": "hello"},
            {"verb": "mail/list", "handle": who + "b"},
            {"verb": "mail/send", "to": who + "b", "body": "who am I", "key": "detached"},
        ],
        detach=True,
    )
    hello, listing, send = rec["answers"]
    assert rec["token"] == ""  # it really had no secret
    assert hello["caller"] != "operator", (
        f"a setsid child of session alice is taken for the operator: {hello['caller']}"
    )
    assert_refused(listing, "forbidden")
    if send["ok"]:
        (msg,) = [m for m in scan_mail(d.dir).messages if m["meta"]["key"] == "detached"]
        assert msg["meta"]["from"] == who, msg["meta"]
