"""The bench CLI as one click application.

The fast-path agent commands (mail send/list/read, report) are declared here too, for help
and for anything the fast parser in `bench_cli.fastpath` declines; both paths run the same
functions in `bench_cli.fastpath`.
"""

import base64
import collections
import functools
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime

import click
import msgspec

from bench_cli import fastpath, hints, humanize, output
from bench_cli.eventtext import format_event
from bench_wire import messages as m
from bench_wire.client import Client, check
from bench_wire.config import DAEMON_OPTIONS, option_dest, option_problem
from bench_wire.errors import EXIT_INTERRUPTED, EXIT_OK, WireError
from bench_wire.paths import dir_problem, resolve_dir, socket_path

_enc = msgspec.json.Encoder()

DIR_HELP = "BENCH_DIR (else $BENCH_DIR, else $XDG_STATE_HOME/bench or ~/.local/state/bench)"
JSON_HELP = "print the daemon's answer as JSON (one object, or one per line for a stream)"


class Ctx:
    def __init__(self, bench_dir: str | None, as_json: bool):
        self.dir = bench_dir
        self.json = as_json


def common(f):
    """--dir and --json on every command; also accepted before the subcommand
    (`bench --dir X status`, like `git -C`). After the subcommand wins."""

    @functools.wraps(f)
    def merged(*args, bench_dir=None, as_json=False, **kw):
        top = click.get_current_context().find_root().params
        return f(
            *args,
            bench_dir=top.get("bench_dir") if bench_dir is None else bench_dir,
            as_json=bool(as_json or top.get("as_json")),
            **kw,
        )

    merged = click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(merged)
    return click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)(merged)


def _check_daemon_option(ctx, param, value):
    if value is not None:
        problem = option_problem(param.opts[0], value)
        if problem:
            raise click.BadParameter(problem)
    return value


def daemon_options(f):
    for flag, env, typ, default, help_ in reversed(DAEMON_OPTIONS):
        f = click.option(
            flag,
            option_dest(flag),
            type=typ,
            default=None,
            callback=_check_daemon_option,
            help=f"{help_} (env {env}; default {default})",
        )(f)
    f = click.option("--test-hooks", is_flag=True, hidden=True)(f)
    f = click.option(
        "--node",
        help="this node's name for mail between nodes (env BENCH_NODE; default: the hostname)",
    )(f)
    return click.option(
        "--bridge",
        "bridge_url",
        metavar="URL",
        help="also run and supervise a bridge to this NATS URL",
    )(f)


def _daemon_argv(bench_dir: str, kw: dict) -> list[str]:
    argv = [sys.executable, "-m", "benchd.server.app", "--dir", bench_dir]
    return argv + _option_args(kw)


def _option_args(kw: dict) -> list[str]:
    argv = []
    for flag, *_ in DAEMON_OPTIONS:
        v = kw.get(option_dest(flag))
        if v is not None:
            argv += [flag, str(v)]
    if kw.get("test_hooks"):
        argv.append("--test-hooks")
    if kw.get("node"):
        argv += ["--node", kw["node"]]
    if kw.get("bridge_url"):
        argv += ["--bridge", kw["bridge_url"]]
    return argv


def call(bench_dir, req: m.Request, timeout: float | None = 30.0) -> dict:
    """One request built from the msgspec types; the decoded answer (or WireError)."""
    with Client(bench_dir, timeout=timeout) as conn:
        conn.send_raw(_enc.encode(_with_token(req)) + b"\n")
        return check(conn.recv())


def _with_token(req: m.Request) -> m.Request:
    token = os.environ.get("BENCH_TOKEN")
    if token and req.token is None:
        req.token = token
    return req


def done(ctx: Ctx, a: dict, text: str) -> None:
    output.answer(a, ctx.json, text)


def colour(as_json: bool) -> bool:
    """Colour only on a terminal, never with --json, never when NO_COLOR is set."""
    return not as_json and not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def examples(*lines: str) -> str:
    """A help epilog of example command lines (\\b keeps click from rewrapping them)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


# ---------------------------------------------------------------- completion


def _complete_handles(ctx, param, incomplete):
    """Live handles (and, for mail, the existing mailboxes), asked of the daemon."""
    from click.shell_completion import CompletionItem

    bench_dir = ctx.params.get("bench_dir") or ctx.find_root().params.get("bench_dir")
    names: set[str] = set()
    try:
        a = call(bench_dir, m.SessionList(), timeout=2.0)
        names |= {s["handle"] for s in a["sessions"] if s["state"] == "running"}
    except (WireError, OSError):
        pass
    if param.name in ("to", "handle", "reply_to"):
        try:
            names |= set(os.listdir(os.path.join(resolve_dir(bench_dir), "mail")))
        except (OSError, WireError):
            pass
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def reply_to_option(help_: str):
    """`--reply-to H` (repeatable, handles completed), with its help for this command."""
    return click.option(
        "--reply-to",
        "reply_to",
        multiple=True,
        metavar="H",
        shell_complete=_complete_handles,
        help=help_,
    )


def _complete_sessions(ctx, param, incomplete):
    """Handles of live sessions, and the ids of every session the daemon remembers."""
    from click.shell_completion import CompletionItem

    bench_dir = ctx.params.get("bench_dir") or ctx.find_root().params.get("bench_dir")
    try:
        a = call(bench_dir, m.SessionList(), timeout=2.0)
    except (WireError, OSError):
        return []
    names = {s["handle"] for s in a["sessions"] if s["state"] == "running"}
    names |= {s["session"] for s in a["sessions"]}
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


class Group(click.Group):
    def format_commands(self, ctx, formatter):
        """The command list with each summary whole (click cuts them to fit a line)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=500)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:
            meant = hints.command(tuple(ctx.command_path.split()[1:]), args[0], self.commands)
            if meant is None:
                raise
            msg = f"No such command {args[0]!r}. Did you mean {meant}?"
            raise click.UsageError(msg, ctx) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except WireError as err:
            as_json = "--json" in sys.argv
            ctx.exit(output.fail(err, as_json))
        except KeyboardInterrupt:
            # Ctrl-C (e.g. ending `events -f`): the user asked for it, so print nothing.
            ctx.exit(EXIT_INTERRUPTED)


@click.group(
    cls=Group,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "show_default": True,
        "max_content_width": 100,
    },
)
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.version_option(package_name="bench", prog_name="bench")
def cli(bench_dir, as_json):
    """bench: mail and wakes for AI coding agents side by side on one machine.

    --dir and --json go before or after the command. `bench help COMMAND` shows a
    command's options and examples.

    \b
    Exit codes:
      0    ok
      1    refused (by the daemon, or the running daemon has other options)
      2    bad command line, whoever found it (click or bench)
      3    no daemon answers on this BENCH_DIR
      4    the daemon's answer could not be understood, or the connection broke
      130  interrupted with Ctrl-C (nothing is printed)
    """


@cli.command(name="help")
@click.argument("command", nargs=-1)
def help_(command):
    """Show help for bench or for a COMMAND (e.g. bench help mail send)."""
    here = click.Context(cli, info_name="bench", **cli.context_settings)
    target: click.Command = cli
    for name in command:
        sub = target.get_command(here, name) if isinstance(target, click.Group) else None
        if sub is None:
            meant = hints.command(tuple(command[:-1]), name, getattr(target, "commands", {}))
            tip = f" Did you mean {meant}?" if meant else ""
            raise click.UsageError(f"no such command: {' '.join(command)} (see bench help).{tip}")
        here = click.Context(sub, info_name=name, parent=here)
        target = sub
    click.echo(here.get_help())


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell):
    """Print the completion script for SHELL (handles complete live)."""
    from click.shell_completion import get_completion_class

    comp = get_completion_class(shell)(cli, {}, "bench", "_BENCH_COMPLETE")
    click.echo(comp.source())


completion.epilog = examples(
    'eval "$(bench completion bash)"      # in ~/.bashrc',
    'eval "$(bench completion zsh)"       # in ~/.zshrc',
    "bench completion fish > ~/.config/fish/completions/bench.fish",
)


# ---------------------------------------------------------------- daemon


def _hello(bench_dir: str | None) -> dict | None:
    try:
        return call(bench_dir, m.Hello())
    except WireError as err:
        if err.code == "no-daemon":
            return None
        raise


def _running_options(a: dict) -> dict:
    """The running daemon's options, as far as its hello tells them (flag -> value)."""
    r = a["reactor"]
    known = {
        "--idle-gate": r.get("idle_gate"),
        "--paste-settle": r.get("paste_settle"),
        "--wake-burst": r.get("wake_burst"),
        "--wake-refill": r.get("wake_refill"),
        "--enter-retries": r.get("enter_retries"),
        "--enter-check": r.get("enter_check"),
        "--retry-base": r.get("retry_base"),
        "--max-connections": a["caps"].get("connections"),
        "--max-children": a["caps"].get("max_children"),
        "--max-depth": a["caps"].get("max_depth"),
        "--spawn-rate": a["caps"].get("spawn_rate"),
        "--exited-kept": a["caps"].get("exited_kept"),
        "--kept-scrollback": a["caps"].get("kept_scrollback_bytes"),
        "--disk-reserve": (a.get("disk") or {}).get("reserve"),
    }
    for flag in (
        "--send-burst",
        "--send-rate",
        "--operator-send-burst",
        "--operator-send-rate",
        "--mailbox-messages",
        "--mailbox-bytes",
        "--reply-to-max",
    ):
        known[flag] = a["caps"].get(option_dest(flag))
    return {k: v for k, v in known.items() if v is not None}


def _differing(a: dict, kw: dict) -> list[str]:
    """The options given to `up` that the running daemon does not have."""
    running = _running_options(a)
    out = []
    for flag, *_ in DAEMON_OPTIONS:
        want = kw.get(option_dest(flag))
        if want is None:
            continue
        have = running.get(flag)
        if have is None or float(have) != float(want):
            out.append(f"{flag} {want} (running: {'unknown' if have is None else have})")
    if kw.get("node") and a.get("node") and kw["node"] != a["node"]:
        out.append(f"--node {kw['node']} (running: {a['node']})")
    return out


@cli.command()
@common
@daemon_options
@click.option(
    "--restart",
    is_flag=True,
    help="stop a running daemon first (its sessions end), then start with these options",
)
def up(bench_dir, as_json, restart, **kw):
    """Start benchd detached; return once it answers (no-op if running)."""
    ctx = Ctx(bench_dir, as_json)
    d = resolve_dir(bench_dir)
    socket_path(d)
    a = _hello(d)
    if a is not None and restart:
        call(d, m.Stop())
        _wait_stopped(d)
        a = None
    if a is not None:
        differ = _differing(a, kw)
        if differ:
            raise WireError(
                "options-differ",
                f"benchd already runs for {a['bench_dir']} (pid {a['pid']}) with other "
                f"options: {'; '.join(differ)}. bench up --restart stops it (its sessions "
                "end) and starts it with these",
            )
        done(ctx, a, f"benchd already running: pid {a['pid']}, {a['bench_dir']}")
        return
    # Make and check BENCH_DIR before writing benchd.out there (the daemon checks again),
    # in a process of its own: the CLI imports nothing of benchd.
    problem = dir_problem(d)
    if problem is not None:
        raise problem
    check = subprocess.run(
        [sys.executable, "-m", "benchd.server.prepare", d], capture_output=True, text=True
    )
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or [f"cannot use {d}"]
        try:  # a directory that cannot be made is a bad-dir, named by its errno
            os.makedirs(d, 0o700, exist_ok=True)
        except OSError as err:
            raise dir_problem(d, err) or WireError("unsafe-dir", lines[-1]) from None
        raise WireError("unsafe-dir", lines[-1])
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
        _daemon_argv(d, kw),
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
            done(ctx, a, f"benchd started: pid {a['pid']}, {a['bench_dir']}")
            return
        # A daemon that lost the race for the lock to a concurrent `bench up` is fine: keep
        # waiting for the winner to answer (it holds the lock until it has stopped).
        if proc.poll() is not None and not _lock_held(d):
            a = _hello(d)
            if a is not None:
                done(ctx, a, f"benchd already running: pid {a['pid']}, {a['bench_dir']}")
                return
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
    "bench up --idle-gate 1.5",
    "bench up --restart --idle-gate 1.5",
    "bench up --node node2",
    "bench up --node node1 --bridge tls://nats.example:4222",
)


def _lock_held(d: str) -> bool:
    """Whether some daemon holds BENCH_DIR's flock (is starting, serving or stopping)."""
    import fcntl

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
    """The daemon holds its flock until it has ended its sessions, logged their exits
    and daemon/stopped: being able to take the lock means it is done."""
    import fcntl

    deadline = time.monotonic() + 30
    fd = os.open(os.path.join(d, "benchd.lock"), os.O_RDONLY | os.O_NOFOLLOW)
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


@cli.command(epilog=examples("bench down"))
@common
def down(bench_dir, as_json):
    """Stop benchd (sessions are ended); no-op if none runs."""
    ctx = Ctx(bench_dir, as_json)
    d = resolve_dir(bench_dir)
    try:
        a = call(d, m.Stop())
    except WireError as err:
        if err.code != "no-daemon":
            raise
        # Like `up`, idempotent: the state asked for (no daemon) already holds.
        done(
            ctx,
            {"ok": True, "type": "stop", "running": False, "bench_dir": d},
            f"no benchd was running for {d}",
        )
        return
    _wait_stopped(d)
    done(ctx, a, f"benchd stopped ({d})")


@cli.command(epilog=examples("bench status", "bench status --json", "bench status --ack"))
@common
@click.option(
    "--ack",
    is_flag=True,
    help="acknowledge the journal damage shown (operator only): it is no longer shown",
)
def status(bench_dir, as_json, ack):
    """Is benchd running: pid, version, BENCH_DIR, counts, disk, journal damage."""
    ctx = Ctx(bench_dir, as_json)
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
        f"node      {a.get('node') or '-'}, {_bridge_line(a.get('bridge') or {})}\n"
        f"jobs      a session may start {c.get('max_children')} at a time, "
        f"{c.get('spawn_rate')} an hour, {c.get('max_depth')} deep"
    )
    for dmg in a.get("journal_damage") or []:
        text += (
            f"\njournal   DAMAGED at start: {dmg['segment']} offset {dmg['offset']} "
            f"({dmg['size']} bytes): {dmg['held']} (event seq {dmg['seq']}; "
            "bench status --ack once seen)"
        )
    done(ctx, a, text)


def disk_health(disk: dict) -> str:
    """One line on the state dir's disk: full (sends refused) or its free space."""
    free = f"{disk.get('free', 0) / 1e6:,.1f} MB free"
    if disk.get("full"):
        return f"FULL: sends answer disk-full until there is room ({free}); reading works"
    return f"ok, {free}"


def index_health(ix: dict) -> str:
    """One line on the mail index: ok, or why not and what waits."""
    state = ix.get("state", "ok")
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


def _bridge_line(b: dict) -> str:
    state = "bridge connected" if b.get("connected") else "bridge not connected"
    if b.get("seen_ms") is None:
        state = "no bridge"
    err = b.get("error")
    if err:
        state = f"bridge stopped: {err['message']} [{err['code']}]"
    return f"{state}, {b.get('queued', 0)} queued outbound"


@cli.command(epilog=examples("bench daemon", "bench daemon --dir /tmp/b --idle-gate 1.5"))
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, hidden=True)
@daemon_options
def daemon(bench_dir, as_json, **kw):
    """Run benchd in the foreground (for a service manager)."""
    top = click.get_current_context().find_root().params.get("bench_dir")
    d = resolve_dir(top if bench_dir is None else bench_dir)
    argv = _daemon_argv(d, kw)
    os.execv(argv[0], argv)


# ---------------------------------------------------------------- nodes


@cli.command()
@common
@click.option(
    "--nats",
    "url",
    required=True,
    metavar="URL",
    envvar="BENCH_NATS_URL",
    help="the NATS server (nats://HOST:PORT, tls://HOST:PORT)",
)
@click.option("--node", help="must match the daemon's node name (a safety check)")
@click.option(
    "--creds",
    type=click.Path(exists=True, dir_okay=False),
    envvar="BENCH_NATS_CREDS",
    help="NATS credentials file",
)
@click.option("--token", envvar="BENCH_NATS_TOKEN", help="NATS auth token")
@click.option(
    "--tls-ca",
    type=click.Path(exists=True, dir_okay=False),
    envvar="BENCH_NATS_TLS_CA",
    help="CA bundle to verify the server (turns TLS on)",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    envvar="BENCH_NATS_TLS_CERT",
    help="client certificate for TLS",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    envvar="BENCH_NATS_TLS_KEY",
    help="client key for TLS",
)
@click.option("--insecure", is_flag=True, help="allow a nats:// URL to another host without TLS")
@click.option(
    "--heartbeat",
    type=float,
    default=5.0,
    show_default=True,
    help="seconds between directory heartbeats",
)
@click.option(
    "--ack-wait",
    type=float,
    default=30.0,
    show_default=True,
    help="seconds before JetStream redelivers a message this bridge did not ack",
)
@click.option(
    "--forget-after",
    type=float,
    default=7 * 86400.0,
    show_default=True,
    help="seconds after which a node not seen is forgotten (mail to it: unknown-node)",
)
@click.option(
    "--max-age",
    type=float,
    default=7 * 86400.0,
    show_default=True,
    help="seconds mail may wait in NATS for this node before it is returned to its sender",
)
@click.option(
    "--entry-max", type=int, default=16384, show_default=True, help="bytes of one directory entry"
)
@click.option(
    "--handles-max", type=int, default=512, show_default=True, help="handles in one directory entry"
)
@click.option(
    "--nodes-max", type=int, default=256, show_default=True, help="nodes kept from the directory"
)
def bridge(bench_dir, as_json, heartbeat, ack_wait, **connection):
    """Carry mail between this node and others over NATS JetStream (foreground)."""
    try:
        from bench_bridge.bridge import Options
        from bench_bridge.bridge import main as bridge_main
    except ImportError as err:
        raise WireError(
            "bad-request", f"the bridge needs the bridge extra: pip install 'bench[bridge]' ({err})"
        ) from None
    if min(heartbeat, ack_wait, *(connection[k] for k in _BRIDGE_LIMITS)) <= 0:
        raise click.BadParameter("must be positive", param_hint="/".join(_BRIDGE_FLAGS))
    opts = Options(resolve_dir(bench_dir), heartbeat=heartbeat, ack_wait=ack_wait, **connection)
    sys.exit(bridge_main(opts))


_BRIDGE_LIMITS = ("forget_after", "max_age", "entry_max", "handles_max", "nodes_max")
_BRIDGE_FLAGS = ("--heartbeat", "--ack-wait", *(f"--{k.replace('_', '-')}" for k in _BRIDGE_LIMITS))

bridge.epilog = examples(
    "bench bridge --nats nats://127.0.0.1:4222",
    "bench bridge --nats tls://nats.example:4222 --tls-ca ca.pem",
)


@cli.command()
@common
def nodes(bench_dir, as_json):
    """The nodes this node's bridge has seen: last heartbeat and live handles."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.NodesRead())
    now = time.time() * 1000
    lines = [f"this node: {a['node']}, {_bridge_line(a['bridge'])}"]
    if not a["nodes"]:
        lines.append("no other nodes seen yet")
    for n in a["nodes"]:
        ago = humanize.duration((now - n["seen_ms"]) / 1000)
        lines.append(f"{n['node']:<24} seen {ago:>4} ago  {' '.join(n['handles']) or '-'}")
    done(ctx, a, "\n".join(lines))


# ---------------------------------------------------------------- service


@cli.group(cls=Group)
def service():
    """Run benchd as a systemd user service."""


UNIT_HELP = "the unit's name: systemctl --user status NAME"


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
@click.option("--name", default="bench", metavar="NAME", help=UNIT_HELP)
@daemon_options
def service_install(bench_dir, as_json, print_only, name, **kw):
    """Write a systemd user unit that runs `bench daemon` for BENCH_DIR."""
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", name):
        raise click.BadParameter("letters, digits and _ . @ - only", param_hint="--name")
    d = resolve_dir(bench_dir)
    socket_path(d)
    text = unit_text(d, name, _bench_program(), _option_args(kw))
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
        Ctx(d, as_json),
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
@click.option("--cwd", type=click.Path(file_okay=False), help="working directory (default: here)")
@click.option("--env", "env", multiple=True, metavar="K=V", help="environment entry (repeat)")
@click.option("--ready", metavar="REGEX", help="screen pattern that must show before a wake")
@click.option("--rows", type=int, default=40, help="the terminal's rows")
@click.option("--cols", type=int, default=120, help="the terminal's columns")
@click.option("--agent", help="an agent preset (claude, codex, pi) for ready pattern and timing")
@click.option("--mail", "mail_file", type=click.File("r"), help="job: task mail (- for stdin)")
@click.option("--subject", default="", help="job: the task mail's subject")
@reply_to_option("job: owed a reply (repeat)")
@click.option("--key", help="job: the task's stable key (default: job-<session>)")
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
    """Start CMD in a pty owned by the daemon: bench spawn --name H -- CMD [ARGS]."""
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


spawn.epilog = examples(
    "bench spawn --name alice -- claude",
    "bench spawn --name alice --agent claude -- claude",
    "bench spawn --name w1 --cwd ~/src/app --env FOO=1 --ready 'standin>' -- python agent.py",
    "bench spawn --name child --mail TASK.md --reply-to parent -- CMD",
    "bench spawn --mail TASK.md --name reviewer --reply-to alice --reply-to bob@node2 -- codex",
)


def _exit_text(s: dict) -> str:
    if s.get("exit") is not None:
        return str(s["exit"])
    if s.get("signal") is not None:
        return humanize.signal_name(s["signal"])
    return "-"


def _state_colour(s: dict) -> str | None:
    if s["state"] == "running":
        return "green"
    return None if s.get("exit") == 0 else "red"


@cli.command()
@common
@click.argument("name", required=False, shell_complete=_complete_sessions)
@click.option(
    "-a",
    "--all",
    "show_all",
    is_flag=True,
    help="also the exited sessions the daemon remembers (newest first)",
)
@click.option("-q", "--quiet", is_flag=True, help="print handles only, one a line")
@click.option(
    "--prune", is_flag=True, help="forget the exited sessions (their mailboxes and events stay)"
)
@click.option("--tree", is_flag=True, help="each session under the one that spawned it")
def ps(bench_dir, as_json, name, show_all, quiet, prune, tree):
    """List live sessions: handle, session id, pid, state, idle time, exit."""
    ctx = Ctx(bench_dir, as_json)
    if prune:
        a = call(bench_dir, m.SessionPrune())
        done(ctx, a, f"forgot {a['forgotten']} exited sessions")
        return
    a = call(bench_dir, m.SessionList())
    listed = a["sessions"]
    live = [s for s in listed if s["state"] == "running"]
    gone = [s for s in reversed(listed) if s["state"] != "running"]  # newest first
    if name is not None:
        # By handle or by id, exited ones included: a handle may have been reused.
        rows = [s for s in live + gone if name in (s["handle"], s["session"])]
        if not rows:
            raise WireError("no-such-session", f"no session, live or exited, is called {name!r}")
    else:
        rows = live + gone if show_all else live
    if ctx.json:
        output.emit_json(dict(a, sessions=rows))
        return
    if quiet:
        if rows:
            output.write("\n".join(s["handle"] for s in rows))
        return
    on = colour(ctx.json)
    if tree and rows:
        from bench_cli import tree as tree_view

        output.write(tree_view.render(rows, _exit_text, _state_colour, on))
        return
    if not rows:
        more = sum(1 for s in listed if s["state"] != "running")
        hint = f" ({more} exited: bench ps -a)" if more else ""
        output.write("no sessions, live or exited" if show_all else "no live sessions" + hint)
        return
    # The state is painted as a piece of its own: nothing in a handle or argv can colour.
    pieces: list = [
        f"{'HANDLE':<20} {'SESSION':<10} {'PID':>7}  {'STATE':<8} {'IDLE':>5}  EXIT     COMMAND"
    ]
    for s in rows:
        idle = "-" if s.get("idle_ms") is None else humanize.duration(s["idle_ms"] / 1000)
        pieces += [f"\n{s['handle']:<20} {s['session']:<10} {s['pid']:>7}  "]
        pieces += [output.paint(f"{s['state']:<8}", _state_colour(s), on)]
        pieces += [f" {idle:>5}  {_exit_text(s):<7}  {' '.join(s.get('argv') or [])}"]
    output.write(pieces)


ps.epilog = examples(
    "bench ps",
    "bench ps -a",
    "bench ps -q",
    "bench ps --tree -a",
    "bench ps s1a2b3c4d",
    "bench ps --prune",
)


@cli.command()
@common
@click.argument("handle", metavar="NAME", shell_complete=_complete_sessions)
@click.option("-f", "--follow", is_flag=True, help="keep printing live output")
@click.option("--screen", is_flag=True, help="print the current screen as text instead")
def tail(bench_dir, as_json, handle, follow, screen):
    """Print a session's output (by handle or id): the scrollback, then (-f) live."""
    req = _with_token(m.SessionTail(handle=handle, follow=follow, screen=screen, id=1))
    out = sys.stdout.buffer
    with Client(bench_dir, timeout=None) as conn:
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


tail.epilog = examples(
    "bench tail alice",
    "bench tail alice -f",
    "bench tail alice --screen",
    "bench tail s1a2b3c4d          # a past session, by id",
)


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option(
    "--json", "as_json", is_flag=True, help="errors before the terminal is joined as JSON"
)
@click.argument("handle", shell_complete=_complete_handles)
def attach(bench_dir, as_json, handle):
    """Join a session's terminal (raw mode). Detach with Ctrl-] (0x1d)."""
    root = click.get_current_context().find_root().params
    bench_dir = root.get("bench_dir") if bench_dir is None else bench_dir
    as_json = as_json or bool(root.get("as_json"))
    if not os.isatty(0):
        raise WireError(
            "usage",
            "bench attach needs a terminal on standard input; to watch "
            "use bench tail -f, to write use bench type",
        )
    from bench_cli.attach import attach as run_attach

    sys.exit(run_attach(bench_dir, handle, as_json))


attach.epilog = examples("bench attach alice")


@cli.command(name="type")
@common
@click.argument("handle", shell_complete=_complete_handles)
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
def type_(bench_dir, as_json, handle, text, no_enter):
    """Write TEXT into a session's terminal, then Enter."""
    ctx = Ctx(bench_dir, as_json)
    a = call(bench_dir, m.SessionType(handle=handle, text=text, enter=not no_enter))
    done(ctx, a, f"typed {a['bytes']} bytes into {handle}")


type_.epilog = examples('bench type alice "run the tests"', "bench type alice q --no-enter")


@cli.command()
@common
@click.argument("handle", shell_complete=_complete_handles)
@click.option("--cancel", is_flag=True, help="cancel its job: no replies are sent")
@click.option("--tree", is_flag=True, help="also every session it spawned, children first")
def kill(bench_dir, as_json, handle, cancel, tree):
    """End a session: SIGHUP, then SIGTERM, then SIGKILL, 1.5 s apart."""
    ctx = Ctx(bench_dir, as_json)
    # A tree ends a level at a time, each level up to 3 grace periods: allow for a deep one.
    a = call(bench_dir, m.SessionKill(handle=handle, cancel=cancel, tree=tree), timeout=120.0)
    more = len(a.get("ended") or []) - 1
    also = f" and {more} below it" if more > 0 else ""
    done(ctx, a, f"ended {a['handle']} (session {a['session']}){also}")


kill.epilog = examples("bench kill alice", "bench kill child --cancel", "bench kill --tree alice")


@cli.command()
@common
@click.argument("text", required=False)
def report(bench_dir, as_json, text):
    """Inside a job: record the content owed to its correspondents (TEXT or -)."""
    sys.exit(fastpath.run(("report",), {"dir": bench_dir, "json": as_json, "text": text}))


report.epilog = examples(
    'bench report "Fixed it: the fixture was missing."', 'echo "long report" | bench report -'
)


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR (else $BENCH_DIR)")
@click.option(
    "--print-config",
    "print_config",
    type=click.Choice(["claude", "codex", "pi"]),
    help="print the MCP configuration for this agent, then exit",
)
def mcp(bench_dir, print_config):
    """Serve the mailroom as MCP tools on stdin/stdout (started by an agent's MCP config)."""
    if print_config:
        from bench_mcp.config import snippet

        note, text = snippet(print_config)
        click.echo(note, err=True)
        sys.stdout.write(text)
        return
    try:
        from bench_mcp import server
    except ImportError as err:  # the optional extra is not installed
        raise WireError(
            "mcp-missing",
            f"bench mcp needs the MCP SDK ({err.name or err} is missing): pip install 'bench[mcp]'",
        ) from None
    if bench_dir is not None:
        resolve_dir(bench_dir)  # an empty --dir is refused now, not at the first tool call
    sys.exit(server.main(bench_dir))


# ---------------------------------------------------------------- mail


@cli.group(cls=Group)
def mail():
    """Send, list and read mail."""


@mail.command("send")
@common
@click.argument("to", shell_complete=_complete_handles)
@click.option("-s", "--subject", help="one line")
@click.option("-m", "--message", "body", help="the body (else standard input)")
@click.option("--key", help="idempotency key: a resend with the same key writes nothing")
@reply_to_option("where replies go (repeat)")
@click.option("--in-reply-to", "in_reply_to", metavar="ID", help="the message this answers")
def mail_send(bench_dir, as_json, to, subject, body, key, reply_to, in_reply_to):
    """Send mail to handle TO."""
    sys.exit(
        fastpath.run(
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


mail_send.epilog = examples(
    'bench mail send bob -s "review" -m "The patch is in /tmp/p.diff"',
    'git diff | bench mail send bob -s "the diff"',
    'bench mail send bob -m "ping" --key ping-42',
    'bench mail send bob -m "see above" --reply-to carol --in-reply-to 20261130T045611.123Z-0001',
    'bench mail send alice@node1 -m "the build is green"',
)


@mail.command("list")
@common
@click.option(
    "--state", type=click.Choice(["unread", "read", "all"]), default="unread", help="which messages"
)
@click.option("--limit", type=int, help="page size (default 50, at most 500)")
@click.option(
    "--handle",
    shell_complete=_complete_handles,
    help="whose mailbox (operator only; default: yours)",
)
@click.option("--cursor", help="continue after this id (from a truncated listing)")
def mail_list(bench_dir, as_json, state, limit, handle, cursor):
    """List mail: metadata only, never bodies."""
    sys.exit(
        fastpath.run(
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


mail_list.epilog = examples(
    "bench mail list",
    "bench mail list --state all --limit 500",
    "bench mail list --handle bob",
    "bench mail list --cursor ID",
)


@mail.command("read")
@common
@click.argument("mail_id", metavar="[ID]", required=False)
@click.option(
    "--handle",
    shell_complete=_complete_handles,
    help="whose mailbox (operator only; default: yours)",
)
def mail_read(bench_dir, as_json, mail_id, handle):
    """Read a message (default: the oldest unread) and retire it to read/."""
    sys.exit(
        fastpath.run(
            ("mail", "read"),
            {"dir": bench_dir, "json": as_json, "mail_id": mail_id, "handle": handle},
        )
    )


mail_read.epilog = examples("bench mail read", "bench mail read 20261130T045611.123Z-0001")


# ---------------------------------------------------------------- events


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_ms(text: str, now: float) -> int:
    """A point in time as `docker logs --since` / `journalctl --since` read it: a duration
    back from now (30s, 10m, 2h, 1d), or a local date and time (2026-11-30T10:00,
    2026-11-30 10:00:00, 2026-11-30); ms since the epoch. ValueError otherwise."""
    hit = _DURATION.fullmatch(text.strip())
    if hit:
        return int((now - float(hit.group(1)) * _UNIT_S[hit.group(2)]) * 1000)
    return int(datetime.fromisoformat(text.strip()).timestamp() * 1000)


class Since(click.ParamType):
    name = "TIME"

    def convert(self, value, param, ctx):
        try:
            return since_ms(value, time.time())
        except ValueError:
            self.fail(
                f"{value!r} is not a time: give a duration (30s, 10m, 2h, 1d) or a date and "
                "time (2026-11-30T10:00); --after SEQ takes a sequence number",
                param,
                ctx,
            )


@cli.command()
@common
@click.option("-f", "--follow", is_flag=True, help="keep printing events as they happen")
@click.option(
    "--since",
    "since",
    type=Since(),
    help="only events from this time on: 10m, 2h, 2026-11-30T10:00",
)
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=0,
    help="only events with a sequence number above this",
)
@click.option(
    "--tail",
    "last",
    type=click.IntRange(min=0),
    metavar="N",
    help="only the last N (then live, with -f)",
)
@click.option("--kind", help="only this kind (e.g. mail/sent)")
@click.option(
    "--session",
    "who",
    metavar="NAME",
    shell_complete=_complete_sessions,
    help="only events of this session (id or handle) or its mailbox",
)
@click.option("--limit", type=click.IntRange(min=1), help="at most this many")
def events(bench_dir, as_json, follow, since, after, last, kind, who, limit):
    """Read (and follow) the event log."""

    def wanted(ev: dict) -> bool:
        if since is not None and ev["ts"] < since:
            return False
        return who is None or who in (
            ev.get("session"),
            ev.get("handle"),
            ev.get("to"),
            ev.get("from"),
        )

    def show(ev: dict) -> None:
        output.emit_json(ev) if as_json else output.write(format_event(ev, on))
        sys.stdout.flush()

    on = colour(as_json)
    shown = 0
    if last is not None:
        # The last N: read what is there (keeping N), then follow from where it ended.
        kept: collections.deque = collections.deque(maxlen=last)
        for ev in _events(bench_dir, after, kind, False, None):
            after = ev["seq"]
            if wanted(ev):
                kept.append(ev)
        for ev in kept:
            show(ev)
        shown = len(kept)
        if not follow:
            return
    if limit is not None and shown >= limit:
        return
    for ev in _events(bench_dir, after, kind, follow, None):
        if wanted(ev):
            show(ev)
            shown += 1
            if limit is not None and shown >= limit:
                return


events.epilog = examples(
    "bench events",
    "bench events -f",
    "bench events --tail 20 -f",
    "bench events --since 10m --kind agent/woken",
    "bench events --after 120",
    "bench events --session s1a2b3c4d",
)


def _events(bench_dir, after: int, kind, follow: bool, limit):
    req = _with_token(m.EventsRead(since=after, kind=kind, follow=follow, limit=limit, id=1))
    with Client(bench_dir, timeout=None) as conn:
        conn.send_raw(_enc.encode(req) + b"\n")
        while True:
            a = check(conn.recv())
            if a["type"] == "end":
                return
            yield a["event"]


def run() -> int:
    try:
        cli.main(prog_name="bench", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


# Commands that live in their own modules register themselves on the groups above.
from bench_cli import search, threads  # noqa: E402,F401


@cli.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR")
def dash(bench_dir):
    """The operator's live dashboard: sessions, screens, mail, events (needs bench[dash])."""
    # Textual draws on standard error and reads standard input: anything but a terminal
    # there would get escape codes in a file and an app no one can quit.
    for fd, name in ((0, "input"), (1, "output"), (2, "error")):
        if not os.isatty(fd):
            raise WireError(
                "usage",
                f"bench dash needs a terminal, and standard {name} is not one; without "
                "one use bench ps, bench events -f and bench tail -f",
            )
    try:
        from bench_cli.dash.app import run as run_dash
    except ImportError as err:
        raise click.ClickException(
            f"bench dash needs the dash extra (pip install 'bench[dash]'): {err}"
        ) from None
    sys.exit(run_dash(bench_dir))
