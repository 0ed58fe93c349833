"""A process that leaves its session never becomes the operator.

What a prompt-injected agent would try, with nothing but the same user's rights: its
program connects (and is placed as its session), forks a child that calls setsid and
keeps the socket, and exits; once the session has ended, the child speaks on the old
connection, on a fresh one, and after a double fork. And the accept race: connect,
fork, the connecting process exits at once, the child speaks; a thousand times.

Each runs with the sandbox (where the kernel allows it) and without (`--isolation
off`, today's rules): without it the escaped child is refused (its connection closed,
a fresh one `unplaceable`); with it the child cannot escape at all (it dies with its
session, since it cannot leave the session's PID namespace).
"""

import json
import os
import sys

import pytest

from tests.support.wait import wait_for

# The hostile program: a job's session. It connects, forks the speaker (setsid, and a
# second fork if DOUBLE), and exits. The speaker holds OUT/alive (a FIFO) open for as
# long as it lives, says OUT/ready (the job waits for that before it exits), waits for OUT/go, then speaks on the old connection and a new one.
ESCAPE = r"""
import json, os, socket, sys, time
out, sock_path = os.environ["OUT"], os.path.join(os.environ["BENCH_DIR"], "benchd.sock")
os.environ.pop("BENCH_TOKEN", None)

def ask(s, req):
    s.sendall(json.dumps(req).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            return "closed"
        data += chunk
    return json.loads(data)

conn = socket.socket(socket.AF_UNIX)
conn.connect(sock_path)
with open(f"{out}/before.json", "w") as f:
    json.dump(ask(conn, {"verb": "hello", "id": 1}), f)
if os.fork() == 0:
    os.setsid()
    if os.environ.get("DOUBLE") and os.fork() != 0:
        os._exit(0)
    alive = os.open(f"{out}/alive", os.O_WRONLY)  # held until this process dies
    open(f"{out}/ready", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{out}/go") and time.monotonic() < deadline:
        time.sleep(0.01)
    got = {}
    try:
        got["old"] = ask(conn, {"verb": "hello", "id": 2})
        got["old_list"] = ask(conn, {"verb": "mail/list", "id": 3, "handle": "victim"})
    except OSError as err:
        got["old"] = got["old_list"] = f"closed ({err.__class__.__name__})"
    fresh = socket.socket(socket.AF_UNIX)
    fresh.connect(sock_path)
    got["new"] = ask(fresh, {"verb": "hello", "id": 4})
    got["new_list"] = ask(fresh, {"verb": "mail/list", "id": 5, "handle": "victim"})
    with open(f"{out}/result.json.tmp", "w") as f:
        json.dump(got, f)
    os.rename(f"{out}/result.json.tmp", f"{out}/result.json")
    os._exit(0)
deadline = time.monotonic() + 60
while not os.path.exists(f"{out}/ready") and time.monotonic() < deadline:
    time.sleep(0.01)
os._exit(0)  # the session ends; the speaker lives on (without the sandbox)
"""


def _refused(answer) -> bool:
    """Closed, or an error that is not the operator's answer."""
    if isinstance(answer, str):
        return answer.startswith("closed")
    return answer.get("ok") is False and answer["error"]["code"] == "unplaceable"


def _never_operator(answer) -> None:
    assert not (isinstance(answer, dict) and answer.get("caller") == "operator"), answer
    assert not (isinstance(answer, dict) and answer.get("ok") and "messages" in answer), answer


@pytest.fixture(params=["auto", "off"])
def isolated(request, make_daemon):
    d = make_daemon("--isolation", request.param)
    on = d.ok("status")["caps"]["isolation"] == "on"
    if request.param == "auto" and not on:
        pytest.skip("the sandbox cannot run here (see bench status); the 'off' run covers it")
    return d, on


@pytest.mark.parametrize("double", [False, True], ids=["setsid", "double-fork"])
def test_an_escaped_child_is_never_the_operator(isolated, tmp_path, double):
    d, on = isolated
    d.ok("spawn", "--name", "victim", "--", "sleep", "600")
    d.ok("mail", "send", "victim", "-m", "victim's secret")
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "alive")
    reader = os.open(out / "alive", os.O_RDONLY | os.O_NONBLOCK)  # the speaker's life
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    task = tmp_path / "task.md"
    task.write_text("escape")
    env = ["--env", f"OUT={out}"] + (["--env", "DOUBLE=1"] if double else [])
    s = d.ok("spawn", "--name", "job", "--mail", str(task), *env, "--", sys.executable, str(script))
    d.wait_event("session/exited", lambda e: e["session"] == s["session"])
    before = json.loads((out / "before.json").read_text())
    assert before["caller"] == "job", before  # it was its session while it lived
    try:
        if on:
            # It cannot leave the session's PID namespace, so it ended with it: the
            # FIFO's only writer (which had it open before the session ended) is gone.
            wait_for(lambda: _eof(reader), 30, "the escaped child to die with its session")
            assert not (out / "result.json").exists()
            return
        (out / "go").touch()
        got = json.loads(wait_for(lambda: _read(out / "result.json"), 60, "the child's requests"))
    finally:
        os.close(reader)
    for answer in got.values():
        _never_operator(answer)
    assert _refused(got["old"]) and _refused(got["old_list"]), got
    assert _refused(got["new"]) and _refused(got["new_list"]), got
    assert d.ok("status")["caller"] == "operator"  # the operator's own processes: unaffected


def _read(path):
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _eof(fd: int) -> bool:
    """Every writer has closed the FIFO (after at least one opened it)."""
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False


# The accept race, from inside a live session: a connector connects and forks; the
# connector exits at once; its child speaks (hello, then another's mail), reports on a
# pipe, and exits. N times in a row; the tally is printed as one JSON line.
RACE = r"""
import json, os, socket, sys
sock_path = os.path.join(os.environ["BENCH_DIR"], "benchd.sock")
os.environ.pop("BENCH_TOKEN", None)
n = int(os.environ["N"])
tally = {}
r, w = os.pipe()

def ask(s, req):
    s.sendall(json.dumps(req).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)

def outcome(a):
    if a is None:
        return "closed"
    if not a.get("ok", True):
        return a["error"]["code"]
    return a.get("caller") or "ok"

for _ in range(n):
    pid = os.fork()
    if pid == 0:  # the connector
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock_path)
        if os.fork() == 0:  # the speaker
            try:
                got = outcome(ask(s, {"verb": "hello"})) + " " + outcome(
                    ask(s, {"verb": "mail/list", "handle": "victim"}))
            except OSError as err:
                got = "error " + err.__class__.__name__
            os.write(w, got.encode() + b"\n")
            os._exit(0)
        os._exit(0)  # at once: the accept may come after this
    os.waitpid(pid, 0)
    line = b""
    while not line.endswith(b"\n"):
        line += os.read(r, 1)
    key = line.decode().strip()
    tally[key] = tally.get(key, 0) + 1
print("TALLY " + json.dumps(tally), flush=True)
with open(os.environ["OUT"], "w") as f:
    json.dump(tally, f)
"""


@pytest.mark.slow
def test_the_accept_race_never_yields_the_operator(isolated, tmp_path):
    d, _on = isolated
    d.ok("spawn", "--name", "victim", "--", "sleep", "600")
    d.ok("mail", "send", "victim", "-m", "victim's secret")
    out = tmp_path / "tally.json"
    script = tmp_path / "race.py"
    script.write_text(RACE)
    d.ok(
        "spawn", "--name", "racer", "--env", f"OUT={out}", "--env", "N=1000",
        "--", sys.executable, str(script),
    )  # fmt: skip
    tally = json.loads(wait_for(lambda: _read(out), 600, "1,000 races"))
    print(f"accept race ({'sandboxed' if _on else 'unsandboxed'}): {tally}")
    assert sum(tally.values()) == 1000, tally
    for key, count in tally.items():
        hello, _, listing = key.partition(" ")
        assert hello in ("racer", "unplaceable", "closed"), (key, count, tally)
        assert listing in ("forbidden", "unplaceable", "closed"), (key, count, tally)
