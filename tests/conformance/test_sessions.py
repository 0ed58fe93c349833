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


def test_env_in_the_pty(shared, who):
    s = spawn(
        shared, "bash", "-c", 'env | grep ^BENCH_ | sort; echo "TERM=$TERM"; sleep 30', name=who
    )
    wait_screen(shared, who, "TERM=")
    text = screen(shared, who)
    assert f"BENCH_SESSION={s['session']}" in text
    assert f"BENCH_HANDLE={who}" in text
    assert f"BENCH_DIR={shared.dir}" in text
    assert "BENCH_TOKEN=" in text
    assert "TERM=xterm-256color" in text


def test_handle_rules(shared, who):
    for bad in ["Alice", "..", "a/b", "", "x" * 65, "-lead", "sp ace"]:
        r = shared.bench("spawn", "--name", bad, "--json", "--", "sleep", "30")
        assert_refused(r, "bad-handle", rc=1)
    r = shared.bench("spawn", "--name", "operator", "--json", "--", "sleep", "30")
    assert_refused(r, "handle-reserved")
    first = spawn(shared, "sleep", "30", name=who)
    r = shared.bench("spawn", "--name", who, "--json", "--", "sleep", "30")
    assert_refused(r, "handle-taken")
    anon = spawn(shared, "sleep", "30")
    assert anon["handle"] == anon["session"]
    # Exit frees the handle: it can be claimed again, and the mailbox is kept.
    shared.ok("mail", "send", who, "-m", "kept")
    shared.ok("kill", who)
    shared.wait_event("session/exited", lambda e: e["session"] == first["session"])
    again = spawn(shared, "sleep", "30", name=who)
    assert again["session"] != first["session"]
    assert shared.ok("mail", "list", "--handle", who)["total"] == 1
    assert not os.path.exists(os.path.join(shared.dir, "mail", "Alice"))


def test_spawn_errors_are_clear(shared):
    r = shared.bench("spawn", "--json", "--", "no-such-command-xyz")
    assert_refused(r, "spawn-failed", rc=1)
    r = shared.bench("spawn", "--ready", "([", "--json", "--", "sleep", "1")
    assert_refused(r, "bad-regex")
    r = shared.bench("spawn", "--env", "NOEQUALS", "--", "sleep", "1")
    assert r.rc == 2 and "Traceback" not in r.err


def test_type_and_tail(shared, who):
    spawn(shared, "bash", "--norc", "--noprofile", name=who)
    shared.wait_until(lambda: shared.bench("tail", who).out.strip(), 20, "a prompt")
    shared.ok("type", who, "echo $((6*7))-done")
    wait_screen(shared, who, "42-done")
    raw = shared.bench("tail", who)
    assert raw.rc == 0 and "42-done" in raw.out
    r = shared.bench("type", "nobody", "x", "--json")
    assert_refused(r, "no-such-session", rc=1)


def test_tail_follow_streams_until_exit(shared, who):
    spawn(shared, "bash", "-c", "read line; echo got-$line; exit 4", name=who)
    with shared.connect() as c:
        c.send({"verb": "session/tail", "handle": who, "follow": True})
        shared.wait_until(lambda: shared.bench("tail", who).rc == 0, 10, "tail")
        shared.ok("type", who, "abc")
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


def test_exit_is_settled_and_listed(shared, who):
    s = spawn(shared, "bash", "-c", "exit 7", name=who)
    ev = shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["exit"] == 7 and ev["handle"] == who
    rows = {x["session"]: x for x in shared.ok("ps", "-a")["sessions"]}
    assert rows[s["session"]]["state"] == "exited" and rows[s["session"]]["exit"] == 7
    live = shared.ok("ps")["sessions"]  # plain ps: live sessions only
    assert s["session"] not in {x["session"] for x in live}
    assert all(x["state"] != "exited" for x in live), live


def test_kill_escalates_to_sigkill(shared, who):
    s = spawn(
        shared,
        "bash",
        "-c",
        'trap "" HUP TERM; echo armed; while :; do sleep 1; done',
        name=who,
    )
    wait_screen(shared, who, "armed")
    shared.ok("kill", who)
    ev = shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 9


def test_kill_is_sighup_first_like_closing_a_terminal(shared, who):
    # An interactive bash ignores SIGTERM; it leaves on SIGHUP, the first signal sent.
    s = spawn(shared, "bash", "--norc", "-i", name=who)
    shared.ok("type", who, "echo rea''dy")
    wait_screen(shared, who, "ready")
    shared.ok("kill", who)
    ev = shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    assert ev["signal"] == 1 or ev["exit"] == 129, ev


def test_trap_term_alone_ends_on_sigterm(shared, who):
    s = spawn(shared, "bash", "-c", 'trap "" HUP; echo armed; while :; do sleep 1; done', name=who)
    wait_screen(shared, who, "armed")
    shared.ok("kill", who)
    ev = shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
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


def test_identity_a_session_is_itself(shared, who, tmp_path):
    out = tmp_path / "out.json"
    spawn(
        shared,
        "bash",
        "-c",
        f"bench mail send {who}b -m hi --json > {out}.1; "
        f"env -u BENCH_TOKEN bench mail send {who}b -m notoken --json > {out}.2; "
        f"bench mail list --handle {who}b --json > {out}.3; "
        f"BENCH_TOKEN=forged bench mail send {who}b -m x --json > {out}.4; "
        f"bench mail read --handle operator --json > {out}.5; echo finished; sleep 30",
        name=who,
    )
    wait_screen(shared, who, "finished")
    assert json.loads(Path(f"{out}.1").read_text())["ok"]
    assert json.loads(Path(f"{out}.2").read_text())["ok"]
    senders = {m["from"] for m in shared.ok("mail", "list", "--handle", who + "b")["messages"]}
    assert senders == {who}  # with or without its token, it speaks as itself
    assert_refused(json.loads(Path(f"{out}.3").read_text()), "forbidden")
    assert_refused(json.loads(Path(f"{out}.4").read_text()), "bad-token")
    assert_refused(json.loads(Path(f"{out}.5").read_text()), "forbidden")


def test_stale_token_is_refused(shared, who, tmp_path):
    tokfile = tmp_path / "tok"
    s = spawn(shared, "bash", "-c", f'echo "$BENCH_TOKEN" > {tokfile}; exit 0', name=who)
    shared.wait_event("session/exited", lambda e: e["session"] == s["session"])
    token = tokfile.read_text().strip()
    r = shared.bench("mail", "send", "x", "-m", "y", "--json", env={"BENCH_TOKEN": token})
    assert_refused(r, "bad-token", rc=1)


def test_attach_types_and_detaches(shared, who):
    spawn(shared, *standin_argv(), name=who)
    wait_screen(shared, who, "standin>")
    env = shared.env()
    p = ptyprocess.PtyProcess.spawn([BENCH, "attach", who], env=env, dimensions=(30, 100))
    try:
        buf = read_pty(p, b"detach with Ctrl-]")
        p.write(b"hello-attached\r")
        wait_screen(shared, who, "ok: hello-attached")
        p.write(b"\x1d")
        buf += read_pty(p)
        p.wait()
        assert p.exitstatus == 0
        assert b"[detached]" in buf
    finally:
        if p.isalive():
            p.terminate(force=True)
    assert shared.ok("ps", who)["sessions"][0]["state"] == "running"


def test_attach_restores_the_terminal_on_sigterm(shared, who):
    spawn(shared, *standin_argv(), name=who)
    wait_screen(shared, who, "standin>")
    p = ptyprocess.PtyProcess.spawn([BENCH, "attach", who], env=shared.env(), dimensions=(30, 100))
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
    assert {s["handle"]: s["state"] for s in shared.ok("ps")["sessions"]}[who] == "running"
