"""The bench CLI as one click application.

The hot agent commands (mail send/list/read, report) are declared here too, for help
and for anything the fast parser in `bench_cli.hot` declines; both paths run the same
functions in `bench_cli.hot`.
"""

import base64
import os
import subprocess
import sys
import time

import click
import msgspec

from bench_cli import hot, output
from bench_wire import messages as m
from bench_wire.config import DAEMON_OPTIONS, option_dest
from bench_wire.errors import EXIT_OK, WireError
from bench_wire.lean import Connection, check
from bench_wire.paths import resolve_dir, socket_path

_enc = msgspec.json.Encoder()


class Ctx:
    def __init__(self, bench_dir: str | None, as_json: bool):
        self.dir = bench_dir
        self.json = as_json


def common(f):
    """--dir and --json on every command."""
    f = click.option("--json", "as_json", is_flag=True, help="print the daemon's answer as JSON")(f)
    f = click.option(
        "--dir",
        "bench_dir",
        metavar="PATH",
        help="BENCH_DIR (else $BENCH_DIR, else ~/.local/state/bench)",
    )(f)
    return f


def daemon_options(f):
    for flag, env, typ, _default, help_ in reversed(DAEMON_OPTIONS):
        f = click.option(
            flag, option_dest(flag), type=typ, default=None, help=f"{help_} (env {env})"
        )(f)
    f = click.option("--test-hooks", is_flag=True, hidden=True)(f)
    return f


def _daemon_argv(bench_dir: str, kw: dict) -> list[str]:
    argv = [sys.executable, "-m", "benchd.app", "--dir", bench_dir]
    for flag, *_ in DAEMON_OPTIONS:
        v = kw.get(option_dest(flag))
        if v is not None:
            argv += [flag, str(v)]
    if kw.get("test_hooks"):
        argv.append("--test-hooks")
    return argv


def call(bench_dir, req: m.Request) -> dict:
    """One request built from the msgspec types; the decoded answer (or WireError)."""
    with Connection(bench_dir) as conn:
        conn.send_raw(_enc.encode(_with_token(req)) + b"\n")
        return check(conn.recv())


def _with_token(req: m.Request) -> m.Request:
    token = os.environ.get("BENCH_TOKEN")
    if token and req.token is None:
        req.token = token
    return req


def done(ctx: Ctx, a: dict, text: str) -> None:
    output.answer(a, ctx.json, text)


class Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except WireError as err:
            as_json = "--json" in sys.argv
            ctx.exit(output.fail(err, as_json))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bench", prog_name="bench")
def cli():
    """bench: mail and wakes for AI coding agents side by side on one machine.

    Exit codes: 0 ok, 1 refused by the daemon, 2 bad command line, 3 no daemon,
    4 the daemon's answer could not be understood.
    """


# ---------------------------------------------------------------- daemon


def _hello(bench_dir: str | None) -> dict | None:
    try:
        return call(bench_dir, m.Hello())
    except WireError as err:
        if err.code == "no-daemon":
            return None
        raise


@cli.command()
@common
@daemon_options
def up(bench_dir, as_json, **kw):
    """Start benchd detached; return once it answers (no-op if running)."""
    ctx = Ctx(bench_dir, as_json)
    d = resolve_dir(bench_dir)
    socket_path(d)
    a = _hello(d)
    if a is not None:
        done(ctx, a, f"benchd already running: pid {a['pid']}, {a['bench_dir']}")
        return
    os.makedirs(d, mode=0o700, exist_ok=True)
    out = open(os.path.join(d, "benchd.out"), "ab")
    proc = subprocess.Popen(
        _daemon_argv(d, kw),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    out.close()
    deadline = time.monotonic() + 20
    pause = 0.005
    while time.monotonic() < deadline:
        a = _hello(d)
        if a is not None:
            done(ctx, a, f"benchd started: pid {a['pid']}, {a['bench_dir']}")
            return
        if proc.poll() is not None:
            raise WireError("no-daemon", f"benchd exited ({proc.returncode}): {_tail_out(d)}")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    raise WireError("no-daemon", f"benchd did not answer within 20 s; see {d}/benchd.out")


def _tail_out(d: str) -> str:
    try:
        with open(os.path.join(d, "benchd.out"), "rb") as f:
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no output"
    except OSError:
        return "no output"


@cli.command()
@common
def down(bench_dir, as_json):
    """Stop benchd (sessions are ended and their exits logged)."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.Stop())
    d = resolve_dir(bench_dir)
    # The daemon holds its flock until it has ended its sessions, logged their exits
    # and daemon/stopped: being able to take the lock means it is done.
    import fcntl

    deadline = time.monotonic() + 30
    fd = os.open(os.path.join(d, "benchd.lock"), os.O_RDONLY)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WireError(
                        "internal",
                        f"benchd did not finish stopping within 30 s; see {d}/benchd.log",
                    ) from None
                time.sleep(0.02)
    finally:
        os.close(fd)
    done(ctx, a, f"benchd stopped ({d})")


@cli.command()
@common
def status(bench_dir, as_json):
    """Is benchd running: pid, version, BENCH_DIR, counts."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.Hello())
    r = a["reactor"]
    done(
        ctx,
        a,
        (
            f"benchd {a['version']} running: pid {a['pid']}\n"
            f"BENCH_DIR {a['bench_dir']}\n"
            f"you are   {a['caller']}\n"
            f"sessions  {a['sessions']} live, mailboxes {a['mailboxes']}\n"
            f"reactor   idle gate {r['idle_gate']}s, paste settle {r['paste_settle']}s, "
            f"{r['wake_burst']} wakes per {r['wake_refill']}s refill"
        ),
    )


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR")
@click.option("--json", "as_json", is_flag=True, hidden=True)
@daemon_options
def daemon(bench_dir, as_json, **kw):
    """Run benchd in the foreground (for a service manager)."""
    d = resolve_dir(bench_dir)
    argv = _daemon_argv(d, kw)
    os.execv(argv[0], argv)


# ---------------------------------------------------------------- sessions


def _env_pairs(values) -> dict:
    env = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE", param_hint="--env")
        env[k] = val
    return env


@cli.command(context_settings={"ignore_unknown_options": False})
@common
@click.option("--name", help="the session's handle (default: its session id)")
@click.option("--cwd", type=click.Path(file_okay=False), help="working directory")
@click.option("--env", "env", multiple=True, metavar="K=V", help="environment entry (repeat)")
@click.option("--ready", metavar="REGEX", help="screen pattern that must show before a wake")
@click.option("--rows", type=int, default=40, show_default=True)
@click.option("--cols", type=int, default=120, show_default=True)
@click.option("--agent", help="an agent preset (claude, codex, pi) for ready pattern and timing")
@click.option("--mail", "mail_file", type=click.File("r"), help="job: task mail (- for stdin)")
@click.option("--subject", default="", help="job: the task mail's subject")
@click.option("--reply-to", "reply_to", multiple=True, metavar="H", help="job: owed a reply")
@click.option("--key", help="job: the task's stable key (default: generated)")
@click.argument("argv", nargs=-1, required=True)
def spawn(
    bench_dir,
    as_json,
    name,
    cwd,
    env,
    ready,
    rows,
    cols,
    agent,
    mail_file,
    subject,
    reply_to,
    key,
    argv,
):
    """Start CMD in a pty owned by the daemon: bench spawn --name H -- CMD ARGS..."""
    ctx = Ctx(bench_dir, as_json)
    job = None
    if mail_file is not None:
        job = m.JobMailSpec(
            body=mail_file.read(), subject=subject, key=key, reply_to=list(reply_to)
        )
    elif reply_to or key:
        raise click.UsageError("--reply-to and --key need --mail (a job's task mail)")
    req = m.Spawn(
        argv=list(argv),
        name=name,
        cwd=os.path.abspath(cwd or os.getcwd()),
        env=_env_pairs(env),
        ready=ready,
        rows=rows,
        cols=cols,
        agent=agent,
        job=job,
    )
    a = call(bench_dir, req)
    done(ctx, a, f"spawned {a['handle']} (session {a['session']}, pid {a['pid']})")


@cli.command()
@common
def ps(bench_dir, as_json):
    """List sessions: handle, pid, state, idle time, exit status."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.SessionList())
    lines = [f"{'HANDLE':<20} {'SESSION':<10} {'PID':>7}  {'STATE':<8} {'IDLE':>8}  EXIT  COMMAND"]
    for s in a["sessions"]:
        idle = "-" if s.get("idle_ms") is None else f"{s['idle_ms'] / 1000:.1f}s"
        ex = "-"
        if s.get("exit") is not None:
            ex = str(s["exit"])
        elif s.get("signal") is not None:
            ex = f"sig{s['signal']}"
        lines.append(
            f"{s['handle']:<20} {s['session']:<10} {s['pid']:>7}  {s['state']:<8} "
            f"{idle:>8}  {ex:<4}  {' '.join(s.get('argv') or [])}"
        )
    if not a["sessions"]:
        lines = ["no sessions"]
    done(ctx, a, "\n".join(lines))


@cli.command()
@common
@click.argument("handle")
@click.option("-f", "--follow", is_flag=True, help="keep printing live output")
@click.option("--screen", is_flag=True, help="print the current screen as text instead")
def tail(bench_dir, as_json, handle, follow, screen):
    """Print a session's output: the scrollback, then (-f) live."""
    req = _with_token(m.SessionTail(handle=handle, follow=follow, screen=screen, id=1))
    out = sys.stdout.buffer
    with Connection(bench_dir, timeout=None) as conn:
        conn.send_raw(_enc.encode(req) + b"\n")
        while True:
            a = check(conn.recv())
            if as_json:
                output.emit_json(a)
                sys.stdout.flush()
            elif a["type"] == "output":
                out.write(base64.b64decode(a["data"]))
                out.flush()
            elif a["type"] == "screen":
                output.write("\n".join(a["lines"]).rstrip("\n"))
            if a["type"] == "end":
                return


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR")
@click.option(
    "--json", "as_json", is_flag=True, help="errors before the terminal is joined as JSON"
)
@click.argument("handle")
def attach(bench_dir, as_json, handle):
    """Join a session's terminal (raw mode). Detach with Ctrl-] (0x1d)."""
    from bench_cli.attach import attach as run_attach

    sys.exit(run_attach(bench_dir, handle, as_json))


@cli.command(name="type")
@common
@click.argument("handle")
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
def type_(bench_dir, as_json, handle, text, no_enter):
    """Write TEXT into a session's terminal, then Enter."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.SessionType(handle=handle, text=text, enter=not no_enter))
    done(ctx, a, f"typed {a['bytes']} bytes into {handle}")


@cli.command()
@common
@click.argument("handle")
@click.option("--cancel", is_flag=True, help="cancel its job: no replies are sent")
def kill(bench_dir, as_json, handle, cancel):
    """End a session (SIGTERM to its process group, then SIGKILL)."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.SessionKill(handle=handle, cancel=cancel))
    done(ctx, a, f"ended {a['handle']} (session {a['session']})")


@cli.command()
@common
@click.argument("text", required=False)
def report(bench_dir, as_json, text):
    """Inside a session: record the content owed to its job's correspondents (TEXT or -)."""
    sys.exit(hot.run(("report",), {"dir": bench_dir, "json": as_json, "text": text}))


# ---------------------------------------------------------------- mail


@cli.group()
def mail():
    """Send, list and read mail."""


@mail.command("send")
@common
@click.argument("to")
@click.option("-s", "--subject", help="one line")
@click.option("-m", "--message", "body", help="the body (else standard input)")
@click.option("--key", help="idempotency key: a resend with the same key writes nothing")
@click.option("--reply-to", "reply_to", multiple=True, metavar="H", help="where replies go")
@click.option("--in-reply-to", "in_reply_to", metavar="ID", help="the message this answers")
def mail_send(bench_dir, as_json, to, subject, body, key, reply_to, in_reply_to):
    """Send mail to handle TO."""
    sys.exit(
        hot.run(
            ("mail", "send"),
            {
                "dir": bench_dir,
                "json": as_json,
                "to": to,
                "subject": subject,
                "body": body,
                "key": key,
                "reply_to": list(reply_to),
                "in_reply_to": in_reply_to,
            },
        )
    )


@mail.command("list")
@common
@click.option(
    "--state", type=click.Choice(["unread", "read", "all"]), default="unread", show_default=True
)
@click.option("--limit", type=int, help="page size (default 50, at most 500)")
@click.option("--handle", help="whose mailbox (operator only; default: yours)")
@click.option("--cursor", help="continue after this id (from a truncated listing)")
def mail_list(bench_dir, as_json, state, limit, handle, cursor):
    """List mail: metadata only, never bodies."""
    sys.exit(
        hot.run(
            ("mail", "list"),
            {
                "dir": bench_dir,
                "json": as_json,
                "state": state,
                "limit": limit,
                "handle": handle,
                "cursor": cursor,
            },
        )
    )


@mail.command("read")
@common
@click.argument("mail_id", required=False)
@click.option("--handle", help="whose mailbox (operator only; default: yours)")
def mail_read(bench_dir, as_json, mail_id, handle):
    """Read a message (default: the oldest unread) and retire it to read/."""
    sys.exit(
        hot.run(
            ("mail", "read"),
            {"dir": bench_dir, "json": as_json, "mail_id": mail_id, "handle": handle},
        )
    )


# ---------------------------------------------------------------- events


@cli.command()
@common
@click.option("-f", "--follow", is_flag=True, help="keep printing events as they happen")
@click.option("--since", type=int, default=0, help="only events with seq above this")
@click.option("--kind", help="only this kind (e.g. mail/sent)")
@click.option("--limit", type=int, help="at most this many")
def events(bench_dir, as_json, follow, since, kind, limit):
    """Read (and follow) the event log."""
    req = _with_token(m.EventsRead(since=since, kind=kind, follow=follow, limit=limit, id=1))
    with Connection(bench_dir, timeout=None) as conn:
        conn.send_raw(_enc.encode(req) + b"\n")
        while True:
            a = check(conn.recv())
            if a["type"] == "end":
                return
            ev = a["event"]
            if as_json:
                output.emit_json(ev)
            else:
                output.write(format_event(ev))
            sys.stdout.flush()


def format_event(ev: dict) -> str:
    ts = time.strftime("%H:%M:%S", time.localtime(ev["ts"] / 1000)) + f".{ev['ts'] % 1000:03d}"
    rest = " ".join(f"{k}={v}" for k, v in ev.items() if k not in ("seq", "ts", "kind"))
    return f"{ev['seq']:>6}  {ts}  {ev['kind']:<16} {rest}"


def run() -> int:
    try:
        cli.main(prog_name="bench", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return EXIT_OK


# Commands that live in their own modules register themselves on the groups above.
from bench_cli import search, threads  # noqa: E402,F401


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR")
def dash(bench_dir):
    """The operator's live dashboard: sessions, screens, mail, events (needs bench[dash])."""
    try:
        from bench_cli.dash.app import run as run_dash
    except ImportError as err:
        raise click.ClickException(
            f"bench dash needs the dash extra (pip install 'bench[dash]'): {err}"
        ) from None
    sys.exit(run_dash(bench_dir))
