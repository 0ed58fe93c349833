"""The daemon's process: `bench up`, `down`, `status`, `daemon` and `service install`.
The CLI imports nothing of benchd: `up` and `daemon` run it as a process."""

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time

import click

from bench_cli import output, team
from bench_cli.context import (
    DIR_HELP,
    DaemonOption,
    Group,
    Json,
    call,
    common,
    daemon_argv,
    daemon_options,
    examples,
    given,
    option_args,
)
from bench_cli.output import done
from bench_wire import messages as m
from bench_wire import untrusted
from bench_wire.client import dir_problem, resolve_dir, socket_path
from bench_wire.config import OPTIONS
from bench_wire.errors import WireError

# The daemon options given to a command, by field name (see @daemon_options).
Options = dict[str, DaemonOption]


def _hello(bench_dir: str | None) -> Json | None:
    try:
        return call(bench_dir, m.Hello())
    except WireError as err:
        if err.code == "no-daemon":
            return None
        raise


def _running_options(a: Json) -> dict[str, float]:
    """The running daemon's options its hello tells (flag -> value; `Option.hello`)."""
    known: dict[str, float] = {}
    for o in OPTIONS:
        if o.hello:
            part, _, name = o.hello.partition(".")
            value = (a.get(part) or {}).get(name)
            if value is not None:
                known[o.flag] = value
    return known


def _differing(a: Json, kw: Options) -> list[str]:
    """The options given to `up` that the running daemon does not have."""
    running = _running_options(a)
    out = []
    for o in OPTIONS:
        want = kw.get(o.dest)
        if want is None:
            continue
        have = running.get(o.flag)
        if have is None or float(have) != float(want):
            out.append(f"{o.flag} {want} (running: {'unknown' if have is None else have})")
    if kw.get("node") and a.get("node") and kw["node"] != a["node"]:
        out.append(f"--node {kw['node']} (running: {a['node']})")
    running_on = a["caps"].get("isolation") == "on"
    if kw.get("isolation") == "off" and running_on:
        out.append("--isolation off (running: on)")
    if kw.get("isolation") == "required" and not running_on:
        out.append("--isolation required (running: off)")
    return out


@click.command()
@common
@daemon_options
@click.option(
    "--restart",
    is_flag=True,
    help="stop a running daemon first (its sessions end), then start with these options",
)
@click.option(
    "-f",
    "--file",
    "team_file",
    metavar="FILE",
    help=f"a team file: its daemon options, then each agent it names that is not running "
    f"(default: ./{team.DEFAULT_FILE} when it exists and --dir is not given)",
)
def up(
    bench_dir: str | None,
    as_json: bool,
    restart: bool,
    team_file: str | None,
    **kw: DaemonOption,
) -> None:
    """Start benchd detached; return once it answers (no-op if running). With a team
    file, also start the agents it names that are not running (docs/team.md)."""
    d = resolve_dir(bench_dir)
    socket_path(d)
    path = team.find_file(team_file, dir_given=bench_dir is not None)
    # The whole file is checked before anything starts (the daemon included).
    squad = team.load(path, d) if path is not None else None
    if squad is not None:  # options on the command line win over the file's
        for dest, value in squad.daemon.items():
            if kw.get(dest) is None:
                kw[dest] = value
    a, text = _up(d, restart, kw)
    if squad is None:
        if team_file is None and bench_dir is not None and os.path.isfile(team.DEFAULT_FILE):
            text += f"\n./{team.DEFAULT_FILE} not read (--dir given): bench up -f to use it"
        done(as_json, a, text)
        return
    results = team.up(d, squad, call)
    done(
        as_json,
        dict(a, team=results, team_file=squad.path),
        f"{text}\n{team.describe(results, squad.path)}",
    )


def _up(d: str, restart: bool, kw: Options) -> tuple[Json, str]:
    """The daemon for `d` running, with the options asked for: its hello, and what was done."""
    a = _hello(d)
    if a is not None and restart:
        call(d, m.Stop())
        _wait_stopped(d)
        a = None
    if a is not None:
        return a, _already(a, kw)
    # Make and check BENCH_DIR before writing benchd.out there (the daemon checks again).
    _prepare(d)
    # One `bench up` at a time starts a daemon for a directory: the others wait on the
    # start lock, then find the winner answering, and never start a daemon that would
    # lose the race for benchd.lock (or make a removed directory again and stay).
    lock_fd = _start_lock(d)
    try:
        a = _hello(d)
        if a is not None:
            return a, _already(a, kw)
        a = _start(d, kw)
    finally:
        os.close(lock_fd)
    return a, f"benchd started: pid {a['pid']}, {a['bench_dir']}"


def _already(a: Json, kw: Options) -> str:
    differ = _differing(a, kw)
    if differ:
        raise WireError(
            "options-differ",
            f"benchd already runs for {a['bench_dir']} (pid {a['pid']}) with other "
            f"options: {'; '.join(differ)}. bench up --restart stops it (its sessions "
            "end) and starts it with these",
        )
    return f"benchd already running: pid {a['pid']}, {a['bench_dir']}"


def _prepare(d: str) -> None:
    problem = dir_problem(d)
    if problem is not None:
        raise problem
    check = subprocess.run(
        [sys.executable, "-m", "benchd.store.statedir", d], capture_output=True, text=True
    )
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or [f"cannot use {d}"]
        try:  # a directory that cannot be made is a bad-dir, named by its errno
            os.makedirs(d, 0o700, exist_ok=True)
        except OSError as err:
            raise dir_problem(d, err) or WireError("unsafe-dir", lines[-1]) from None
        raise WireError("unsafe-dir", lines[-1])


START_WAIT = 30.0  # seconds a `bench up` waits for another one's start to finish


def _start_lock(d: str) -> int:
    """An flock on BENCH_DIR itself (nothing more to make), held while this `bench up`
    starts a daemon; the fd is closed on exec, so the daemon does not inherit it."""
    deadline = time.monotonic() + START_WAIT
    pause = 0.005
    while True:
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as err:
            raise dir_problem(d, err) or WireError("unsafe-dir", f"cannot use {d}: {err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                raise WireError(
                    "no-daemon",
                    f"another bench up has been starting benchd for {d} for "
                    f"{START_WAIT:.0f} s and it does not answer; see {d}/benchd.out",
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            continue
        if os.fstat(fd).st_nlink == 0:  # removed while we waited: start over, made anew
            os.close(fd)
            _prepare(d)
            continue
        return fd


def _start(d: str, kw: Options) -> Json:
    """Start benchd for `d` and wait for it to answer: its hello."""
    try:
        out_fd = os.open(
            os.path.join(d, "benchd.out"),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
            0o600,
        )
    except OSError as err:
        why = err.strerror or str(err)
        raise dir_problem(d, err) or WireError("unsafe-dir", f"cannot use {d}: {why}") from None
    out_size = os.fstat(out_fd).st_size  # what benchd says from here on is this start's
    proc = subprocess.Popen(
        daemon_argv(d, kw),
        stdin=subprocess.DEVNULL,
        stdout=out_fd,
        stderr=out_fd,
        start_new_session=True,
    )
    os.close(out_fd)
    deadline = time.monotonic() + 20
    pause = 0.005
    while time.monotonic() < deadline:
        a = _hello(d)
        if a is not None:
            return a
        # Ours exits when another daemon (`bench daemon`) holds benchd.lock: wait for that one.
        if proc.poll() is not None and not _lock_held(d):
            a = _hello(d)
            if a is not None:
                return a
            said = _new_out(d, out_size)
            if said:
                raise WireError("no-daemon", f"benchd exited ({proc.returncode}): {said}")
            # Not a word in benchd.out: most often a disk too full to write it.
            free = _free_bytes(d)
            raise WireError(
                "disk-full" if free < 64 << 10 else "no-daemon",
                f"benchd exited ({proc.returncode}) without saying why in {d}/benchd.out; "
                f"{free:,} bytes are free on its disk",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    raise WireError("no-daemon", f"benchd did not answer within 20 s; see {d}/benchd.out")


up.epilog = examples(
    "bench up",
    "bench up -f bench.toml",
    "bench up --idle-gate 1.5",
    "bench up --restart --idle-gate 1.5",
    "bench up --node node2",
    "bench up --node node1 --bridge tls://nats.example:4222",
    "bench up --node node1 --bridge tls://node1:PASSWORD-1@nats.example:4222",
)


def _lock_held(d: str) -> bool:
    """Whether some daemon holds BENCH_DIR's flock (is starting, serving or stopping)."""
    try:
        fd = os.open(os.path.join(d, "benchd.lock"), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _new_out(d: str, since: int) -> str:
    """The last line benchd wrote to benchd.out past `since` ("" if none)."""
    try:
        with open(os.path.join(d, "benchd.out"), "rb") as f:
            f.seek(since)
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""


def _free_bytes(d: str) -> int:
    try:
        st = os.statvfs(d)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def _wait_stopped(d: str) -> None:
    """The daemon holds its flock until it has ended its sessions and logged it all."""
    deadline = time.monotonic() + 30
    while _lock_held(d):
        if time.monotonic() > deadline:
            raise WireError(
                "internal", f"benchd did not finish stopping within 30 s; see {d}/benchd.log"
            )
        time.sleep(0.02)


@click.command(epilog=examples("bench down", "bench down -f bench.toml"))
@common
@click.option(
    "-f",
    "--file",
    "team_file",
    metavar="FILE",
    help="end only the agents this team file started; the daemon and the rest stay",
)
def down(bench_dir: str | None, as_json: bool, team_file: str | None) -> None:
    """Stop benchd (sessions are ended); no-op if none runs. With -f, end only the
    sessions a team file started."""
    d = resolve_dir(bench_dir)
    if team_file is not None:
        squad = team.load(os.path.abspath(team_file), d)
        ended = team.down(d, squad, call)
        w = max((len(e["name"]) for e in ended), default=0)
        lines = [
            f"ended    {e['name']:<{w}}  session {e['session']}, pid {e['pid']}" for e in ended
        ]
        text = "\n".join(lines) or f"no running session was started from {team_file}"
        done(as_json, {"ok": True, "type": "team/down", "ended": ended}, text)
        return
    try:
        a = call(d, m.Stop())
    except WireError as err:
        if err.code != "no-daemon":
            raise
        # Like `up`, idempotent: the state asked for (no daemon) already holds.
        done(
            as_json,
            {"ok": True, "type": "stop", "running": False, "bench_dir": d},
            f"no benchd was running for {d}",
        )
        return
    _wait_stopped(d)
    done(as_json, a, f"benchd stopped ({d})")


@click.command(epilog=examples("bench status", "bench status --json", "bench status --ack"))
@common
@click.option(
    "--ack",
    is_flag=True,
    help="acknowledge the journal damage shown (operator only): it is no longer shown",
)
def status(bench_dir: str | None, as_json: bool, ack: bool) -> None:
    """Is benchd running: pid, version, BENCH_DIR, counts, disk, journal damage."""
    if ack:
        call(bench_dir, m.JournalAck())
    a = call(bench_dir, m.Hello())
    r, c = a["reactor"], a["caps"]
    text = (
        f"benchd {a['version']} running: pid {a['pid']}\n"
        f"BENCH_DIR {a['bench_dir']}\n"
        f"you are   {a['caller']}\n"
        f"sessions  {a['sessions']} live, mailboxes {a['mailboxes']}\n"
        f"index     {index_health(a.get('index') or {})}\n"
        f"disk      {disk_health(a.get('disk') or {})}\n"
        f"reactor   idle gate {r['idle_gate']}s, paste settle {r['paste_settle']}s, "
        f"{r['wake_burst']} wakes per {r['wake_refill']}s refill\n"
        f"node      {a.get('node') or '-'}, {output.bridge_line(a.get('bridge') or {})}\n"
        f"jobs      a session may start {c.get('max_children')} at a time, "
        f"{c.get('spawn_rate')} an hour, {c.get('max_depth')} deep\n"
        f"sandbox   {isolation_line(c)}"
    )
    listed = call(bench_dir, m.SessionList()).get("sessions") or []
    agents = agents_line(listed)
    if agents:
        text += f"\nagents    {agents}"
        a["agents"] = {
            s["handle"]: s["agent"] for s in listed if s.get("agent") and s["state"] == "running"
        }
    for dmg in a.get("journal_damage") or []:
        text += (
            f"\njournal   DAMAGED at start: {dmg['segment']} offset {dmg['offset']} "
            f"({dmg['size']} bytes): {dmg['held']} (event seq {dmg['seq']}; "
            "bench status --ack once seen)"
        )
    done(as_json, a, text)


def agents_line(sessions: list[Json]) -> str:
    """The live adapter sessions by state, the blocked and limited by name: "3 with
    adapters: 1 blocked (bob), 1 idle"."""
    by: dict[str, list[str]] = {}
    for s in sessions:
        a = s.get("agent")
        if a and s.get("state") == "running":
            by.setdefault(a.get("state") or "unreported", []).append(s["handle"])
    if not by:
        return ""
    parts = []
    for state in ("blocked", "limited", "working", "idle", "unreported", "exited"):
        names = by.get(state)
        if names:
            who = (
                f" ({', '.join(untrusted.escape(n) for n in names[:5])})"
                if state in ("blocked", "limited")
                else ""
            )
            parts.append(f"{len(names)} {state}{who}")
    return f"{sum(len(v) for v in by.values())} with adapters: " + ", ".join(parts)


def isolation_line(caps: Json) -> str:
    """One line on the sessions' sandbox: on, or off and why."""
    if caps.get("isolation") == "on":
        return "on: each session in its own PID namespace and BENCH_DIR view (bwrap)"
    return f"OFF: {caps.get('isolation_note') or 'this daemon does not sandbox sessions'}"


def disk_health(disk: Json) -> str:
    """One line on the state dir's disk: full (sends refused) or its free space."""
    free = f"{disk.get('free', 0) / 1e6:,.1f} MB free"
    if disk.get("full"):
        return f"FULL: sends answer disk-full until there is room ({free}); reading works"
    return f"ok, {free}"


def index_health(ix: Json) -> str:
    """One line on the mail index: ok, or why not and what waits."""
    state: str = ix.get("state", "ok")
    text = state
    if state == "retrying":
        text += (
            f" ({ix.get('failures', 0)} failed commits; {ix.get('pending', 0)} changes "
            f"held in memory: {ix.get('error')})"
        )
    elif state == "in-memory":
        text += " (no index file could be used; it is rebuilt from the files at the next start)"
    if ix.get("rebuilds"):
        text += f", rebuilt from the files {ix['rebuilds']}x since start"
    return text


@click.command(epilog=examples("bench daemon", "bench daemon --dir /tmp/b --idle-gate 1.5"))
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, hidden=True)
@daemon_options
def daemon(bench_dir: str | None, as_json: bool, **kw: DaemonOption) -> None:
    """Run benchd in the foreground (for a service manager)."""
    d = resolve_dir(given(bench_dir, as_json)[0])
    argv = daemon_argv(d, kw)
    os.execv(argv[0], argv)


# ---------------------------------------------------------------- service


@click.group(cls=Group)
def service() -> None:
    """Run benchd as a systemd user service."""


def unit_text(bench_dir: str, name: str, bench: str, options: list[str]) -> str:
    """The systemd user unit that runs `bench daemon` for one BENCH_DIR."""
    argv = " ".join(_unit_quote(w) for w in [bench, "daemon", "--dir", bench_dir, *options])
    return (
        f"# Written by `bench service install`: benchd for BENCH_DIR={bench_dir}\n"
        f"# socket: {bench_dir}/benchd.sock; its structured log: {bench_dir}/benchd.log;\n"
        f"# its output: journalctl --user -u {name}; state: systemctl --user status {name}\n"
        "[Unit]\n"
        f"Description=bench daemon (benchd) for {bench_dir}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"Environment={_unit_quote('BENCH_DIR=' + bench_dir)}\n"
        f"ExecStart={argv}\n"
        "# benchd ends its sessions itself on SIGTERM; the rest of the group only after.\n"
        "KillMode=mixed\n"
        "TimeoutStopSec=30\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def _unit_quote(word: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bench_program() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "bench")
    return here if os.access(here, os.X_OK) else os.path.abspath(sys.argv[0])


@service.command("install")
@common
@click.option("--print", "print_only", is_flag=True, help="print the unit; write nothing")
@click.option(
    "--name", default="bench", metavar="NAME", help="the unit's name: systemctl --user status NAME"
)
@daemon_options
def service_install(
    bench_dir: str | None, as_json: bool, print_only: bool, name: str, **kw: DaemonOption
) -> None:
    """Write a systemd user unit that runs `bench daemon` for BENCH_DIR."""
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", name):
        raise click.BadParameter("letters, digits and _ . @ - only", param_hint="--name")
    d = resolve_dir(bench_dir)
    socket_path(d)
    text = unit_text(d, name, _bench_program(), option_args(kw))
    if print_only:
        click.echo(text, nl=False)
        return
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    unit_dir = os.path.join(config, "systemd", "user")
    os.makedirs(unit_dir, exist_ok=True)
    path = os.path.join(unit_dir, f"{name}.service")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        note = (
            "systemctl was not found: nothing will run this unit here. Without systemd, "
            f"start the daemon with `bench up --dir {d}`, or run `bench daemon --dir {d}` "
            "under your own supervisor"
        )
    else:
        r = subprocess.run([systemctl, "--user", "daemon-reload"], capture_output=True, text=True)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["no reason given"])[-1]
            note = (
                f"systemctl --user daemon-reload failed ({why}): is a user systemd "
                f"running? Until it is, start the daemon with `bench up --dir {d}`"
            )
        else:
            note = (
                f"start it now and at login: systemctl --user enable --now {name}; "
                f"status: systemctl --user status {name}; logs: journalctl --user -u {name}"
            )
    done(
        as_json,
        {
            "ok": True,
            "type": "service/install",
            "path": path,
            "unit": name,
            "systemctl": systemctl is not None,
            "note": note,
        },
        f"wrote {path}\n{note}",
    )


service_install.epilog = examples(
    "bench service install --print",
    "bench service install --dir ~/work/bench --idle-gate 1.5",
    "systemctl --user enable --now bench",
)
