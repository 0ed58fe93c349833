"""Hostile directories, neighbours and sessions: each finding of the trial, redone.

A second local user (`benchfoe-<pid>`, made with useradd for this module and removed
with userdel after it, acting through setpriv)
plants directories, links and a fake daemon; sessions of the same user try the
operator's verbs, hog connections and escape their session; bodies carry terminal
escapes. Real processes, ptys, FIFOs, links and sockets throughout.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import socket
import stat
import subprocess
import sys
import time

import pytest

from tests.conftest import BENCH, BIN, Benchd, short_tmpdir, standin_argv, wait_for
from tests.support.refusal import assert_refused

# The second user exists only while this module runs: made by the `foe` fixture and
# removed after it (userdel). The name carries this process's pid, so test runs side by
# side on one machine never share or remove each other's user; one a killed run left
# behind (its pid gone) is removed the next time.
FOE_PREFIX = "benchfoe-"
FOE = f"{FOE_PREFIX}{os.getpid()}"
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by the other user (the venv lives under /root)


def _userdel(name: str) -> None:
    for _ in range(50):  # userdel refuses while a process of the user is still exiting
        r = subprocess.run(["userdel", name], capture_output=True, text=True)
        if r.returncode in (0, 6):  # 6: no such user
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"could not remove the user {name}: {r.stderr}")
    subprocess.run(["groupdel", name], capture_output=True)  # if userdel left the group


def _leftovers() -> list[str]:
    """Users a killed run of this module left behind (its pid no longer exists)."""
    import pwd

    out = []
    for entry in pwd.getpwall():
        pid = entry.pw_name.removeprefix(FOE_PREFIX)
        ours = entry.pw_name.startswith(FOE_PREFIX) and pid.isdigit()
        if ours and pid != str(os.getpid()) and not os.path.exists(f"/proc/{pid}"):
            out.append(entry.pw_name)
    return out


@pytest.fixture(scope="module")
def foe():
    """The second user, made for this module and removed after it; skips without root."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create and act as a second user (useradd, setpriv)")
    if any(shutil.which(t) is None for t in ("setpriv", "useradd", "userdel")):
        pytest.skip("needs useradd, userdel and setpriv to act as a second user")
    for name in [*_leftovers(), FOE]:  # FOE too: a killed run may have had our pid
        _userdel(name)
    r = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", FOE],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r
    try:
        yield FOE
    finally:
        _userdel(FOE)


def as_foe(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", f"--reuid={FOE}", f"--regid={FOE}", "--clear-groups", *argv],
        capture_output=True,
        text=True,
        cwd="/",
        **kw,
    )


def run_bench(
    *args: str, env: dict | None = None, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    e["PATH"] = BIN + os.pathsep + e.get("PATH", "")
    e.update(env or {})
    return subprocess.run(
        [BENCH, *args],
        env=e,
        input=input,
        capture_output=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


@pytest.fixture
def victim():
    """Our own files a hostile directory points its links at."""
    d = short_tmpdir("v")
    precious = os.path.join(d, "precious.txt")
    with open(precious, "w") as f:
        f.write("keep me")
    keep = os.path.join(d, "keepdir")
    os.mkdir(keep)
    with open(os.path.join(keep, "a.md"), "w") as f:
        f.write("keep me too")
    yield precious, keep
    shutil.rmtree(d, ignore_errors=True)


def intact(precious: str, keep: str) -> None:
    with open(precious) as f:
        assert f.read() == "keep me"
    assert os.listdir(keep) == ["a.md"]


# ------------------------------------------------------------------ 1. the state dir


def test_a_state_dir_of_another_user_is_refused_and_its_links_not_followed(foe, victim):
    precious, keep = victim
    d = short_tmpdir("h")
    os.rmdir(d)
    try:
        assert as_foe("mkdir", "-m", "0777", d).returncode == 0
        assert as_foe("mkdir", "-p", os.path.join(d, "mail", "x")).returncode == 0
        assert as_foe("ln", "-s", precious, os.path.join(d, "benchd.lock")).returncode == 0
        assert as_foe("ln", "-s", keep, os.path.join(d, "mail", "x", "tmp")).returncode == 0
        r = run_bench("up", "--dir", d)
        err = r.stderr.decode()
        assert r.returncode == 2, r
        assert f"owned by {FOE}" in err and "[unsafe-dir]" in err, err
        assert len(err.strip().splitlines()) == 1, err
        # The daemon on its own refuses too, in one line.
        r = subprocess.run(
            [sys.executable, "-m", "benchd.server.app", "--dir", d],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 2 and "unsafe BENCH_DIR" in r.stderr, r
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        intact(precious, keep)
        assert not os.path.exists(os.path.join(d, "benchd.sock"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize(
    "where", ["benchd.lock", "benchd.log", "index.sqlite", "mail/x/tmp", "jobs/tmp", "jobs/done"]
)
def test_links_in_our_own_state_dir_refuse_the_start(victim, bench_dir, where):
    precious, keep = victim
    target = keep if where.endswith(("tmp", "done")) else precious
    path = os.path.join(bench_dir, where)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
    r = run_bench("up", "--dir", bench_dir)
    err = r.stderr.decode()
    assert r.returncode == 2 and "symbolic link" in err and where.split("/")[-1] in err, r
    intact(precious, keep)


def test_a_parent_writable_by_others_is_refused(foe, bench_dir):
    parent = os.path.join(bench_dir, "p")
    os.mkdir(parent)
    os.chmod(parent, 0o777)  # not sticky: anyone could rename BENCH_DIR away
    d = os.path.join(parent, "b")
    r = run_bench("up", "--dir", d)
    assert r.returncode == 2 and "writable by group or others" in r.stderr.decode(), r
    os.chmod(parent, 0o755)
    shutil.chown(parent, FOE)  # owned by someone else: same
    r = run_bench("up", "--dir", d)
    assert r.returncode == 2 and f"owned by {FOE}" in r.stderr.decode(), r


FAKE_DAEMON = r"""
import os, socket, sys
path, record = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
c.settimeout(20)
got = b""
try:
    c.sendall(b'{"type":"mail/send","ok":true,"id":1,"mail_id":"x","path":"/x","to":"bob",'
              b'"key":"k","live":true,"duplicate":false}\n')
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
except OSError:
    pass
with open(record + ".tmp", "wb") as f:
    f.write(got)
os.rename(record + ".tmp", record)
"""


def test_the_cli_refuses_a_daemon_of_another_user(foe):
    d = short_tmpdir("f")
    os.rmdir(d)
    try:
        assert as_foe("mkdir", "-m", "0777", d).returncode == 0
        record = os.path.join(d, "got")
        fake = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={FOE}",
                f"--regid={FOE}",
                "--clear-groups",
                SYSTEM_PYTHON,
                "-c",
                FAKE_DAEMON,
                os.path.join(d, "benchd.sock"),
                record,
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        try:
            assert fake.stdout.readline().strip() == "listening"
            r = run_bench(
                "mail",
                "send",
                "bob",
                "-m",
                "the secret body",
                "--dir",
                d,
                env={"BENCH_TOKEN": "secret-token-of-a-session"},
            )
            err = r.stderr.decode()
            assert r.returncode == 5, r
            assert "[daemon-not-ours]" in err and "nothing was sent" in err, err
            assert b"sent" not in r.stdout
            wait_for(lambda: os.path.exists(record), 30, "the fake daemon's record")
            with open(record, "rb") as f:
                assert f.read() == b"", "the CLI sent something to another user's daemon"
        finally:
            fake.kill()
            fake.wait()
            fake.stdout.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ 2, 3. recovery


def test_cleanup_skips_what_is_not_a_regular_file_and_never_follows_a_link(make_daemon, victim):
    precious, keep = victim
    d = make_daemon()
    d.ok("mail", "send", "x", "-m", "hello")
    d.kill9()
    tmp = os.path.join(d.dir, "mail", "x", "tmp")
    os.mkdir(os.path.join(tmp, "editor-backup.d"))
    os.mkfifo(os.path.join(tmp, "pipe"))
    os.symlink(precious, os.path.join(tmp, "link"))
    with open(os.path.join(tmp, "stale.md"), "w") as f:
        f.write("staged, never acknowledged")
    d.start()
    assert sorted(os.listdir(tmp)) == ["editor-backup.d", "link", "pipe"]
    intact(precious, keep)
    with open(os.path.join(d.dir, "benchd.log")) as f:
        skipped = [json.loads(x) for x in f if "staging entry skipped" in x]
    assert {os.path.basename(e["path"]) for e in skipped} == {"editor-backup.d", "link", "pipe"}
    assert d.ok("mail", "list", "--handle", "x")["total"] == 1


def test_a_linked_mailbox_made_while_running_is_not_delivered_through(shared, who, victim):
    precious, keep = victim
    os.makedirs(os.path.join(shared.dir, "mail"), exist_ok=True)
    link = os.path.join(shared.dir, "mail", who)
    os.symlink(keep, link)
    try:
        r = shared.bench("mail", "send", who, "-m", "through the link?")
        assert r.rc == 2 and "[unsafe-dir]" in r.err and "not a real directory" in r.err, r
        intact(precious, keep)
        assert shared.ok("mail", "send", who + "o", "-m", "fine")["to"] == who + "o"
    finally:
        os.unlink(link)  # the module's daemon goes on: nothing of this test stays in it


def test_a_fifo_in_an_inbox_does_not_block_recovery(make_daemon):
    d = make_daemon()
    sent = d.ok("mail", "send", "bob", "-m", "real mail")
    d.kill9()
    fifo = os.path.join(d.dir, "mail", "bob", "inbox", "20261130T000000.000Z-0001.md")
    os.mkfifo(fifo)
    r = run_bench("up", "--dir", d.dir, timeout=60)
    try:
        assert r.returncode == 0, r
        a = json.loads(
            run_bench("mail", "list", "--handle", "bob", "--json", "--dir", d.dir).stdout
        )
        assert [m["mail_id"] for m in a["messages"]] == [sent["mail_id"]]
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        run_bench("down", "--dir", d.dir)


# ------------------------------------------------------------------ 4. racing bench up


# Load: eighty `bench up` processes. The inner loop keeps the same property once
# (tests/conformance/test_up_race.py: ten at once, each exits 0, one daemon); `just test`
# runs these rounds too.
@pytest.mark.slow
def test_concurrent_bench_up_all_succeed():
    # The losers of the race for the lock used to exit 3 now and then: several rounds.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    for _round in range(4):
        bench_dir = short_tmpdir()
        procs = [
            subprocess.Popen(
                [BENCH, "up", "--dir", bench_dir, "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(20)
        ]
        try:
            results = [(p.wait(60), *p.communicate()) for p in procs]
            assert [rc for rc, _o, _e in results] == [0] * 20, [r for r in results if r[0]]
            pids = {json.loads(out)["pid"] for _rc, out, _e in results}
            assert len(pids) == 1, pids
        finally:
            run_bench("down", "--dir", bench_dir)
            shutil.rmtree(bench_dir, ignore_errors=True)


# ------------------------------------------------------------------ 5. file modes


def test_every_file_is_0600_and_every_directory_0700(bench_dir):
    # A file left 0644 by an older version is tightened at start.
    os.makedirs(bench_dir, exist_ok=True)
    with open(os.path.join(bench_dir, "benchd.log"), "w"):
        pass
    os.chmod(os.path.join(bench_dir, "benchd.log"), 0o644)
    assert run_bench("up", "--dir", bench_dir).returncode == 0
    try:
        task = os.path.join(bench_dir, "task.md")
        b = Benchd(bench_dir, [])
        b.ok("mail", "send", "bob", "-m", "hi", "-s", "subject")
        with open(task, "w") as f:
            f.write("the task body")
        b.ok("spawn", "--name", "child", "--mail", task, "--reply-to", "operator", "--", "true")
        b.wait_event("job/settled")
        b.ok("mail", "read", "--handle", "bob")
    finally:
        run_bench("down", "--dir", bench_dir)
    os.unlink(task)
    seen = set()
    for root, dirs, files in os.walk(bench_dir):
        for name in dirs:
            assert stat.S_IMODE(os.lstat(os.path.join(root, name)).st_mode) == 0o700, name
        for name in files:
            st = os.lstat(os.path.join(root, name))
            assert stat.S_IMODE(st.st_mode) == 0o600, (name, oct(st.st_mode))
            seen.add(name)
    assert {
        "index.sqlite",
        "benchd.log",
        "benchd.out",
        "events.jsonl",
        "benchd.lock",
    } <= seen, seen


# ------------------------------------------------------------------ 6. connection hogs

HOG = r"""
import json, os, socket, sys
n, out = int(sys.argv[1]), sys.argv[2]
path = os.path.join(os.environ["BENCH_DIR"], "benchd.sock")
held, codes = [], []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    buf = b""
    try:  # a refused connection is answered and closed at once: it may reset our hello
        s.sendall(b'{"verb":"hello","id":1}\n')
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError:
        pass
    if buf.strip():
        a = json.loads(buf.split(b"\n")[0])
        codes.append("ok" if a["ok"] else a["error"]["code"])
    else:
        codes.append("closed")
    held.append(s)
with open(out + ".tmp", "w") as f:
    json.dump(codes, f)
os.rename(out + ".tmp", out)
sys.stdin.read()  # hold every connection until the session is ended
"""


def test_sessions_cannot_lock_out_the_operator(make_daemon, tmp_path):
    d = make_daemon(
        "--max-connections",
        "24",
        "--session-connections",
        "8",
        "--operator-reserve",
        "10",
        "--idle-timeout",
        "600",
    )
    script = tmp_path / "hog.py"
    script.write_text(HOG)
    counts = {}
    for name in ("hog1", "hog2"):
        out = tmp_path / f"{name}.json"
        d.ok("spawn", "--name", name, "--", sys.executable, str(script), "40", str(out))
        codes = json.loads(
            wait_for(lambda out=out: out.exists() and out.read_text(), 60, f"{name}'s connections")
        )
        assert set(codes) <= {"ok", "too-many-connections", "closed"}, codes
        counts[name] = (codes.count("ok"), len(codes) - codes.count("ok"))
    # Per session 8; sessions together 24 - 10 = 14, so the second gets only 6.
    assert counts == {"hog1": (8, 32), "hog2": (6, 34)}, counts
    for verb in (["status"], ["mail", "send", "bob", "-m", "still here"], ["ps"]):
        assert d.bench(*verb).rc == 0, verb
    # Written down as one line per flood of each budget and session (docs/limits.md).
    hits = [e for e in d.events(kind="limit/hit") if e["code"] == "too-many-connections"]
    budgets = {(e["sender"], e["budget"]) for e in hits}
    assert ("hog1", "connections:session") in budgets, hits
    assert ("hog2", "connections:sessions") in budgets, hits
    assert len(hits) == len(budgets), hits  # 66 refusals, one line each flood
    assert d.bench("down").rc == 0  # the operator's down works while the hogs hold on


def test_an_idle_connection_is_closed_and_logged(make_daemon):
    d = make_daemon("--idle-timeout", "1")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(os.path.join(d.dir, "benchd.sock"))
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    a = json.loads(buf.splitlines()[0])
    assert_refused(a, "idle-timeout")
    with open(os.path.join(d.dir, "benchd.log")) as f:
        assert any("connection idle timeout" in x for x in f)
    # A follower with nothing to say is never idle: its stream is open.
    with d.connect() as c:
        c.send({"verb": "events", "follow": True, "since": 10**9})
        c.sock.settimeout(3)
        with pytest.raises(TimeoutError):
            c.sock.recv(1)


def test_a_connection_that_keeps_asking_is_never_idle(make_daemon):
    # The idle reaper times only the wait between requests. A client that keeps asking
    # holds its connection while a quiet one, opened at the same moment, is closed: the
    # quiet one's close is the sign that the timeout has passed for both.
    d = make_daemon("--idle-timeout", "1")
    with d.connect() as quiet, d.connect() as busy:
        deadline = time.monotonic() + 60
        n = 0
        while not select.select([quiet.sock], [], [], 0)[0]:
            assert time.monotonic() < deadline, "the quiet connection was never closed"
            busy.send({"verb": "hello", "id": n})
            a = busy.recv()
            assert a.get("ok") is True and a["id"] == n, a
            n += 1
        assert_refused(quiet.recv(), "idle-timeout")
        busy.send({"verb": "hello", "id": n})
        a = busy.recv()
        assert a.get("ok") is True and a["id"] == n, a


# ------------------------------------------------------------------ 7. authority

IN_SESSION = r"""
set +e
run() { name=$1; shift; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; echo $? >"$OUT/$name.rc"; }
run spawn bench spawn --name carol -- sleep 600
run tail bench tail bob
run screen bench tail bob --screen
run tailself bench tail "$BENCH_HANDLE"
run screenself bench tail "$BENCH_HANDLE" --screen
run kill bench kill bob
run type bench type bob "echo typed"
run list bench mail list --handle carol
run read bench mail read --handle carol
run listself bench mail list --handle "$BENCH_HANDLE"
run ps bench ps
run attach bench attach bob
run stop bench down
touch "$OUT/done"
exec sleep 600
"""


def session_rc(out, name: str) -> tuple[int, str]:
    return int((out / f"{name}.rc").read_text()), (out / f"{name}.err").read_text()


def test_the_permission_matrix_for_sessions(daemon, tmp_path):
    d = daemon
    d.ok("spawn", "--name", "bob", "--", "sleep", "600")
    d.ok("mail", "send", "carol", "-m", "carol's waiting mail")
    out = tmp_path / "out"
    out.mkdir()
    d.ok("spawn", "--name", "alice", "--env", f"OUT={out}", "--", "sh", "-c", IN_SESSION)
    wait_for(lambda: (out / "done").exists(), 60, "alice's commands")
    for name in ("spawn", "tail", "screen", "kill", "type", "list", "read", "attach", "stop"):
        rc, err = session_rc(out, name)
        assert rc == 1 and "[forbidden]" in err, (name, rc, err)
    for name in ("tailself", "screenself", "listself", "ps"):
        rc, err = session_rc(out, name)
        assert rc == 0, (name, rc, err)
    # Nothing happened to carol's mail or bob; carol was never spawned.
    assert d.ok("mail", "list", "--handle", "carol")["total"] == 1
    states = {s["handle"]: s["state"] for s in d.ok("ps")["sessions"]}
    assert states == {"bob": "running", "alice": "running"}, states
    # The operator may do each of them.
    assert d.bench("tail", "bob", "--screen").rc == 0
    assert d.ok("type", "bob", "x")["bytes"] == 2
    assert d.ok("mail", "read", "--handle", "carol")["body"] == "carol's waiting mail"
    d.ok("spawn", "--name", "carol", "--", "sleep", "600")
    assert d.ok("kill", "bob")["handle"] == "bob"


CHILD = r"""
bench kill "$BENCH_HANDLE" --cancel >"$OUT/cancel.out" 2>"$OUT/cancel.err"
echo $? >"$OUT/cancel.rc"
bench kill "$BENCH_HANDLE"  # ending itself is allowed: the job settles from its exit
exec sleep 600
"""


def test_a_jobs_child_may_not_cancel_its_own_job(shared, who, tmp_path):
    d = shared
    out = tmp_path / "out"
    out.mkdir()
    task = tmp_path / "task.md"
    task.write_text("do it")
    d.ok("spawn", "--name", who + "p", "--", "sleep", "600")
    d.ok(
        "spawn",
        "--name",
        who + "c",
        "--mail",
        str(task),
        "--reply-to",
        who + "p",
        "--env",
        f"OUT={out}",
        "--",
        "sh",
        "-c",
        CHILD,
    )
    rc = int(
        wait_for(
            lambda: (out / "cancel.rc").exists() and (out / "cancel.rc").read_text(),
            60,
            "the child's cancel",
        )
    )
    assert rc == 1 and "[forbidden]" in (out / "cancel.err").read_text()
    settled = d.wait_event("job/settled", lambda e: e["handle"] == who + "c")
    assert settled["outcome"] != "cancelled", settled
    d.wait_event("outbox/posted", lambda e: e["to"] == who + "p")
    assert d.ok("mail", "list", "--handle", who + "p")["total"] == 1


# ------------------------------------------------------------------ 8. identity escapes

ESCAPE = r"""
import os, subprocess, sys
out = os.environ["OUT"]
env = {k: v for k, v in os.environ.items() if k != "BENCH_TOKEN"}
if os.fork() == 0:          # the child starts a new process session ...
    os.setsid()
    parent = os.getpid()
    if os.fork() == 0:      # ... and the grandchild outlives it: re-parented away
        import time
        deadline = time.monotonic() + 20
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.01)
        for name, argv in (("list", ["bench", "mail", "list", "--handle", "bob"]),
                           ("read", ["bench", "mail", "read", "--handle", "bob"]),
                           ("type", ["bench", "type", "bob", "echo pwned"]),
                           ("status", ["bench", "status"])):
            r = subprocess.run(argv, env=env, capture_output=True, text=True)
            with open(f"{out}/{name}.txt", "w") as f:
                f.write(f"{r.returncode}\n{r.stderr}{r.stdout}")
        open(f"{out}/done", "w").close()
        os._exit(0)
    os._exit(0)
os.wait()
sys.stdin.read()
"""


def test_a_process_that_left_its_session_is_not_the_operator(daemon, tmp_path):
    d = daemon
    d.ok("spawn", "--name", "bob", "--", "sleep", "600")
    d.ok("mail", "send", "bob", "-m", "bob's private mail")
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    d.ok("spawn", "--name", "alice", "--env", f"OUT={out}", "--", sys.executable, str(script))
    wait_for(lambda: (out / "done").exists(), 60, "the escaped process")
    sandboxed = d.ok("status")["caps"]["isolation"] == "on"
    for name in ("list", "read", "type", "status"):
        rc, _, text = (out / f"{name}.txt").read_text().partition("\n")
        if sandboxed:  # it cannot leave its PID namespace: it is still alice
            if name == "status":
                assert rc == "0" and "you are   alice" in text, (name, rc, text)
            else:
                assert rc == "1" and "[forbidden]" in text, (name, rc, text)
        else:
            assert rc == "1" and "[unplaceable]" in text, (name, rc, text)
    assert d.ok("mail", "list", "--handle", "bob")["total"] == 1
    # The operator's own processes are unaffected.
    assert d.ok("status")["caller"] == "operator"


# ------------------------------------------------------------------ 9. terminal escapes


def in_pty(*args: str, env: dict) -> bytes:
    """Run bench with stdout and stderr on a real terminal; everything it printed."""
    master, slave = pty.openpty()
    e = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    e.update(env)
    p = subprocess.Popen(
        [BENCH, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=e
    )
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    assert p.wait(60) == 0, got
    return got


HOSTILE = "fine\x1b]0;pwned title\x07\x1b[3A\rfrom:    operator\x9b2J\n"


def test_control_characters_are_shown_escaped_on_a_terminal(shared, who):
    d = shared
    env = {"BENCH_DIR": d.dir}
    sent = d.ok("mail", "send", "operator", "-m", HOSTILE)
    d.ok(
        "spawn",
        "--name",
        who,
        "--",
        "sh",
        "-c",
        "printf 'raw\\033[1mbold\\n'; sleep 600",
        "arg\x1b]0;t\x07",
    )
    d.wait_until(lambda: b"bold" in in_pty("tail", who, env=env), 30, "esc's output")
    for args in (["mail", "read", sent["mail_id"]], ["events"], ["ps"]):
        # bench's own colour (a state in `ps`, on a terminal) is the only escape allowed.
        shown = re.sub(rb"\x1b\[(?:3[1-6]|0)m", b"", in_pty(*args, env=env))
        assert b"\x1b" not in shown and b"\x07" not in shown, (args, shown)
        assert b"\\x1b]0;" in shown, (args, shown)
    # --json stays exact; raw tail is the terminal's own stream.
    as_json = in_pty("mail", "read", sent["mail_id"], "--json", env=env)
    assert json.loads(as_json.replace(b"\r\n", b"\n"))["body"].replace(
        "\r\n", "\n"
    ) == HOSTILE.replace("\r\n", "\n")
    assert b"\x1b[1mbold" in in_pty("tail", who, env=env)


# ------------------------------------------------------------------ 10. screen sizes


def screen_of(d, handle: str) -> dict:
    r = d.bench("tail", handle, "--screen", "--json")
    assert r.rc == 0, r
    return json.loads(r.out.splitlines()[0])


def test_screen_size_is_capped_at_spawn_and_resize(shared, who):
    d = shared
    # The CLI refuses it as a usage error; the daemon, asked directly, refuses it too.
    r = d.bench("spawn", "--name", who, "--rows", "1000", "--cols", "1000", "--", "sleep", "600")
    assert r.rc == 2 and "1<=x<=500" in r.err, r
    with d.connect() as c:
        c.send(
            {
                "verb": "session/spawn",
                "name": who,
                "argv": ["sleep", "600"],
                "rows": 1000,
                "cols": 1000,
            }
        )
        a = c.recv()
    assert not a["ok"] and "1-500 rows" in a["error"]["message"], a
    d.ok("spawn", "--name", who, "--rows", "500", "--cols", "1000", "--", *standin_argv())
    d.wait_until(
        lambda: "standin>" in "\n".join(screen_of(d, who)["lines"]), 30, "the stand-in's prompt"
    )
    with d.connect() as c:
        c.send({"verb": "session/attach", "handle": who, "rows": 5000, "cols": 5000})
        a = c.recv()
        assert a["ok"] and (a["rows"], a["cols"]) == (500, 1000), a
        c.send({"verb": "session/resize", "rows": 9000, "cols": 9000})
        c.send({"verb": "session/detach"})
        while (a := c.recv())["type"] != "end":
            pass
    assert len(screen_of(d, who)["lines"]) == 500


# ------------------------------------------------------------------ 11. the CLI's own checks


def test_an_oversized_body_is_refused_in_the_users_terms(shared, who, tmp_path):
    d = shared
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    code = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[1], 'rb') as f:\n"
        "    r = subprocess.run(sys.argv[2:], stdin=f, capture_output=True, text=True)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(r.stderr, end='')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(big), BENCH, "mail", "send", who],
        capture_output=True,
        text=True,
        env=d.env(),
        timeout=60,
    )
    head, _, err = r.stdout.partition("\n")
    rc, rss_kib = map(int, head.split())
    assert rc == 1 and "[body-too-large]" in err, r
    assert "52,428,800 bytes" in err and "262,144" in err, err
    assert rss_kib < 100 * 1024, f"the client read the whole body: {rss_kib} KiB"
    # From a pipe, the size is only known to exceed the cap.
    p = d.bench("mail", "send", who, input="x" * (300 * 1024))
    assert p.rc == 1 and "more than 262,144 bytes" in p.err, p
    assert d.ok("mail", "list", "--handle", who)["total"] == 0


def test_invalid_utf8_on_stdin_is_reported_with_its_offset(shared, who):
    r = run_bench("mail", "send", who, input=b"hello \xffworld", env={"BENCH_DIR": shared.dir})
    err = r.stderr.decode()
    assert r.returncode == 2, r
    assert "standard input is not valid UTF-8: byte 0xff at offset 6" in err, err
    assert "[bad-stdin]" in err
    assert shared.ok("mail", "list", "--handle", who)["total"] == 0


def test_admission_pure_bookkeeping():
    from benchd.core.authority import Admission
    from benchd.core.names import OPERATOR

    a = Admission(total=6, per_session=2, per_operator=5, reserve=2)
    assert [a.admit("s1") for _ in range(3)][2] is not None  # per session
    assert a.admit("s2") is None and a.admit("s2") is None
    assert "kept for the operator" in str(a.admit("s3"))  # sessions hold 4 = 6 - 2
    assert a.admit(OPERATOR) is None and a.admit(OPERATOR) is None
    assert "limit of 6" in str(a.admit(OPERATOR))
    a.release("s1")
    assert a.admit(OPERATOR) is None
    a.release("s2")
    assert a.admit("s3") is None
