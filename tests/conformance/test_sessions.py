"""Sessions in ptys, the relay, handles and identity, against the real daemon and CLI."""

import base64
import json
import os
import select
import termios
import time
from pathlib import Path

import ptyprocess

from tests.conftest import BENCH, spawn, standin_argv
from tests.support.refusal import assert_refused


def screen(daemon, handle):
    return daemon.bench("tail", handle, "--screen").out


def wait_screen(daemon, handle, text, timeout=20):
    return daemon.wait_until(
        lambda: text in screen(daemon, handle), timeout, f"{text!r} on {handle}'s screen"
    )


def read_pty(p, until: bytes | None = None, timeout: float = 30.0) -> bytes:
    """What a client in a pty prints: up to `until`, or (None) all of it, drained to the
    end after the client exits (its last words may still sit in the pty's buffer)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while until is None or until not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"waiting for {until!r}; got {buf!r}")
        ready, _, _ = select.select([p.fd], [], [], left)
        if not ready:
            continue
        try:
            buf += p.read(4096)
        except EOFError:
            if until is None:
                return buf
            raise AssertionError(f"the client ended before printing {until!r}: {buf!r}") from None
    return buf


def test_env_in_the_pty(daemon):
    s = spawn(
        daemon, "bash", "-c", 'env | grep ^BENCH_ | sort; echo "TERM=$TERM"; sleep 30', name="envy"
    )
    wait_screen(daemon, "envy", "TERM=")
    text = screen(daemon, "envy")
    assert f"BENCH_SESSION={s['session']}" in text
    assert "BENCH_HANDLE=envy" in text
    assert f"BENCH_DIR={daemon.dir}" in text
    assert "BENCH_TOKEN=" in text
    assert "TERM=xterm-256color" in text


def test_handle_rules(daemon):
    for bad in ["Alice", "..", "a/b", "", "x" * 65, "-lead", "sp ace"]:
        r = daemon.bench("spawn", "--name", bad, "--json", "--", "sleep", "30")
        assert_refused(r, "bad-handle", rc=1)
    r = daemon.bench("spawn", "--name", "operator", "--json", "--", "sleep", "30")
    assert_refused(r, "handle-reserved")
    first = spawn(daemon, "sleep", "30", name="dup")
    r = daemon.bench("spawn", "--name", "dup", "--json", "--", "sleep", "30")
    assert_refused(r, "handle-taken")
    anon = spawn(daemon, "sleep", "30")
    assert anon["handle"] == anon["session"]
    # Exit frees the handle: it can be claimed again, and the mailbox is kept.
    daemon.ok("mail", "send", "dup", "-m", "kept")
    daemon.ok("kill", "dup")
    daemon.wait_event("session/exited", lambda e: e["session"] == first["session"])
    again = spawn(daemon, "sleep", "30", name="dup")
    assert again["session"] != first["session"]
    assert daemon.ok("mail", "list", "--handle", "dup")["total"] == 1
    assert not os.path.exists(os.path.join(daemon.dir, "mail", "Alice"))


def test_spawn_errors_are_clear(daemon):
    r = daemon.bench("spawn", "--json", "--", "no-such-command-xyz")
    assert_refused(r, "spawn-failed", rc=1)
    r = daemon.bench("spawn", "--ready", "([", "--json", "--", "sleep", "1")
    assert_refused(r, "bad-regex")
    r = daemon.bench("spawn", "--env", "NOEQUALS", "--", "sleep", "1")
    assert r.rc == 2 and "Traceback" not in r.err


def test_type_and_tail(daemon):
    spawn(daemon, "bash", "--norc", "--noprofile", name="sh")
    daemon.wait_until(lambda: daemon.bench("tail", "sh").out.strip(), 20, "a prompt")
    daemon.ok("type", "sh", "echo $((6*7))-done")
    wait_screen(daemon, "sh", "42-done")
    raw = daemon.bench("tail", "sh")
    assert raw.rc == 0 and "42-done" in raw.out
    r = daemon.bench("type", "nobody", "x", "--json")
    assert_refused(r, "no-such-session", rc=1)


def test_tail_follow_streams_until_exit(daemon):
    spawn(daemon, "bash", "-c", "read line; echo got-$line; exit 4", name="tf")
    with daemon.connect() as c:
        c.send({"verb": "session/tail", "handle": "tf", "follow": True})
        daemon.wait_until(lambda: daemon.bench("tail", "tf").rc == 0, 10, "tail")
        daemon.ok("type", "tf", "abc")
        seen = b""
        while True:
            a = c.recv()
            assert a["ok"], a
            if a["type"] == "output":
                seen += base64.b64decode(a["data"])
            if a["type"] == "end":
                break
    assert b"got-abc" in seen
    assert a["reason"] == "exited" and a["exit"] == 4


def test_exit_is_settled_and_listed(daemon):
    s = spawn(daemon, "bash", "-c", "exit 7", name="seven")
    ev = daemon.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["exit"] == 7 and ev["handle"] == "seven"
    rows = {x["session"]: x for x in daemon.ok("ps", "-a")["sessions"]}
    assert rows[s["session"]]["state"] == "exited" and rows[s["session"]]["exit"] == 7
    assert daemon.ok("ps")["sessions"] == []  # plain ps: live sessions only


def test_kill_escalates_to_sigkill(daemon):
    s = spawn(
        daemon,
        "bash",
        "-c",
        'trap "" HUP TERM; echo armed; while :; do sleep 1; done',
        name="stubborn",
    )
    wait_screen(daemon, "stubborn", "armed")
    daemon.ok("kill", "stubborn")
    ev = daemon.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 9


def test_kill_is_sighup_first_like_closing_a_terminal(daemon):
    # An interactive bash ignores SIGTERM; it leaves on SIGHUP, the first signal sent.
    s = spawn(daemon, "bash", "--norc", "-i", name="shell")
    daemon.ok("type", "shell", "echo rea''dy")
    wait_screen(daemon, "shell", "ready")
    daemon.ok("kill", "shell")
    ev = daemon.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 1 or ev["exit"] == 129, ev


def test_trap_term_alone_ends_on_sigterm(daemon):
    s = spawn(
        daemon, "bash", "-c", 'trap "" HUP; echo armed; while :; do sleep 1; done', name="nohup"
    )
    wait_screen(daemon, "nohup", "armed")
    daemon.ok("kill", "nohup")
    ev = daemon.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 15


def test_down_ends_sessions(make_daemon):
    d = make_daemon()
    s = spawn(d, "sleep", "60", name="sleeper")
    r = d.bench("down")
    assert r.rc == 0, r
    d.proc.wait(30)
    d.start()
    ev = d.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 1  # SIGHUP, the first of bench kill's signals


def test_identity_a_session_is_itself(daemon, tmp_path):
    out = tmp_path / "out.json"
    spawn(
        daemon,
        "bash",
        "-c",
        f"bench mail send bob -m hi --json > {out}.1; "
        f"env -u BENCH_TOKEN bench mail send bob -m notoken --json > {out}.2; "
        f"bench mail list --handle bob --json > {out}.3; "
        f"BENCH_TOKEN=forged bench mail send bob -m x --json > {out}.4; "
        f"bench mail read --handle operator --json > {out}.5; echo finished; sleep 30",
        name="alice",
    )
    wait_screen(daemon, "alice", "finished")
    assert json.loads(Path(f"{out}.1").read_text())["ok"]
    assert json.loads(Path(f"{out}.2").read_text())["ok"]
    senders = {m["from"] for m in daemon.ok("mail", "list", "--handle", "bob")["messages"]}
    assert senders == {"alice"}  # with or without its token, it speaks as itself
    assert_refused(json.loads(Path(f"{out}.3").read_text()), "forbidden")
    assert_refused(json.loads(Path(f"{out}.4").read_text()), "bad-token")
    assert_refused(json.loads(Path(f"{out}.5").read_text()), "forbidden")


def test_stale_token_is_refused(daemon, tmp_path):
    tokfile = tmp_path / "tok"
    s = spawn(daemon, "bash", "-c", f'echo "$BENCH_TOKEN" > {tokfile}; exit 0', name="brief")
    daemon.wait_event("session/exited", lambda e: e["session"] == s["session"])
    token = tokfile.read_text().strip()
    r = daemon.bench("mail", "send", "x", "-m", "y", "--json", env={"BENCH_TOKEN": token})
    assert_refused(r, "bad-token", rc=1)


def test_attach_types_and_detaches(daemon):
    spawn(daemon, *standin_argv(), name="att")
    wait_screen(daemon, "att", "standin>")
    env = daemon.env()
    p = ptyprocess.PtyProcess.spawn([BENCH, "attach", "att"], env=env, dimensions=(30, 100))
    try:
        buf = read_pty(p, b"detach with Ctrl-]")
        p.write(b"hello-attached\r")
        wait_screen(daemon, "att", "ok: hello-attached")
        p.write(b"\x1d")
        buf += read_pty(p)
        p.wait()
        assert p.exitstatus == 0
        assert b"[detached]" in buf
    finally:
        if p.isalive():
            p.terminate(force=True)
    assert daemon.ok("ps")["sessions"][0]["state"] == "running"


def test_attach_restores_the_terminal_on_sigterm(daemon):
    spawn(daemon, *standin_argv(), name="att2")
    wait_screen(daemon, "att2", "standin>")
    p = ptyprocess.PtyProcess.spawn(
        [BENCH, "attach", "att2"], env=daemon.env(), dimensions=(30, 100)
    )
    try:
        buf = read_pty(p, b"detach with Ctrl-]")
        # Raw mode is on now: the pty's line discipline no longer echoes or cooks.
        assert not (termios.tcgetattr(p.fd)[3] & termios.ICANON)
        p.kill(15)
        buf += read_pty(p)
        p.wait()
        assert b"[stopped by a signal]" in buf
        assert p.exitstatus == 0
    finally:
        if p.isalive():
            p.terminate(force=True)
    assert {s["handle"]: s["state"] for s in daemon.ok("ps")["sessions"]}["att2"] == "running"
