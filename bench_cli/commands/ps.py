"""Sessions: `bench spawn`, `ps`, `tail`, `attach`, `type`, `kill`, `report` (a job's
content, on the fast path too), and `dash`, the operator's view of them all."""

import base64
import os
import shlex
import sys
import time
from typing import TextIO

import click
import msgspec

from bench_cli import entry, hints, output, team
from bench_cli.context import (
    DIR_HELP,
    Json,
    ask,
    colour,
    common,
    complete_handles,
    complete_sessions,
    connect,
    examples,
    given,
    reply_to_option,
)
from bench_cli.output import done
from bench_cli.team import COLS_MAX, ROWS_MAX
from bench_wire import messages as m
from bench_wire import untrusted, verbs
from bench_wire.client import resolve_dir
from bench_wire.errors import WireError


def job_state(s: Json) -> str:
    """What the job of a session is doing: -, running, stalled, settling, or its outcome."""
    if not s.get("job"):
        return "-"
    if s.get("outcome"):
        return m.current_outcome(s["outcome"])[0] or "-"
    if s["state"] == "running":
        return "stalled" if s.get("stalled") else "running"
    return "settling"


def tree_names(rows: list[Json]) -> list[tuple[str, Json]]:
    """`bench ps --tree`'s (handle drawn under its parent, row), in spawn order; a session
    whose parent is not listed is a root."""
    nodes = output.forest(rows, lambda s: s["session"], lambda s: s.get("parent"))
    out: list[tuple[str, Json]] = []
    lasts: list[bool] = []  # by depth: whether the row there is the last of its siblings
    for i, (depth, s) in enumerate(nodes):
        after = next((d for d, _ in nodes[i + 1 :] if d <= depth), -1)  # a sibling's or less
        lasts[depth:] = [after < depth]
        lead = "".join("   " if last else "│  " for last in lasts[1:depth])
        mark = ("└─ " if lasts[depth] else "├─ ") if depth else ""  # a root: its handle alone
        out.append((lead + mark + s["handle"], s))
    return out


def table(
    rows: list[Json], tree: bool, started_by: dict[str, str], on: bool
) -> list[str | output.Painted]:
    """`bench ps`'s table as pieces for `output.write` (the state painted apart); without
    `tree`, TEAM and AGENT columns when some session has one."""
    teams = {
        s["session"]: os.path.basename(started_by[s["session"]])
        for s in rows
        if s["session"] in started_by and not tree
    }
    tw = max((len(t) for t in teams.values()), default=0)
    team_head = f"{'TEAM':<{max(tw, 4)}}  " if teams else ""
    agents = {s["session"]: agent_text(s["agent"]) for s in rows if s.get("agent") and not tree}
    aw = max((len(t) for t in agents.values()), default=0)
    agent_head = f"{'AGENT':<{max(aw, 5)}}  " if agents else ""
    width = 28 if tree else 20
    head = f"{'HANDLE':<{width}} {'SESSION':<10} {'PID':>7}  {'STATE':<8} "
    if tree:
        head += f"{'JOB':<11} EXIT     COMMAND"
    else:
        head += f"{'IDLE':>5}  {'JOB':<11} {'LEFT':>5}  EXIT     {agent_head}{team_head}COMMAND"
    pieces: list[str | output.Painted] = [head]
    for name, s in tree_names(rows) if tree else [(s["handle"], s) for s in rows]:
        argv = " ".join(s.get("argv") or [])
        pieces += [f"\n{name:<{width}} {s['session']:<10} {s['pid']:>7}  "]
        pieces += [output.paint(f"{s['state']:<8}", _state_colour(s), on)]
        if tree:
            pieces += [f" {job_state(s):<11} {_exit_text(s):<7}  {argv}"]
            continue
        idle = "-" if s.get("idle_ms") is None else output.duration(s["idle_ms"] / 1000)
        left = s.get("deadline_left_ms")
        left_text = "-" if left is None else output.duration(left / 1000)
        label = f"{teams.get(s['session'], '-'):<{max(tw, 4)}}  " if teams else ""
        agent = f"{agents.get(s['session'], '-'):<{max(aw, 5)}}  " if agents else ""
        pieces += [
            f" {idle:>5}  {job_state(s):<11} {left_text:>5}  {_exit_text(s):<7}  "
            f"{agent}{label}{argv}"
        ]
    if tree:
        return pieces
    for s in rows:  # what a blocked agent waits for, at once under the table
        a = s.get("agent") or {}
        if a.get("state") == "blocked" and s["state"] == "running":
            pieces += [
                f"\n{s['handle']} waits for approval: {untrusted.escape(a.get('tool') or '?')} "
                f"{untrusted.escape((a.get('input') or '')[:120])}  "
                f"(bench approve {s['handle']} | bench deny {s['handle']} -m REASON)"
            ]
    return pieces


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """90s, 10m, 1h, 2d (output.parse_duration): seconds."""
    try:
        return None if value is None else output.parse_duration(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _env_pairs(values: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE", param_hint="--env")
        env[k] = val
    return env


@click.command(context_settings={"ignore_unknown_options": False})
@common
@click.option("--name", help="the session's handle (default: its session id)")
@click.option("--cwd", type=click.Path(file_okay=False), help="working directory (default: here)")
@click.option("--env", "env", multiple=True, metavar="K=V", help="environment entry (repeat)")
@click.option("--ready", metavar="REGEX", help="screen pattern that must show before a wake")
@click.option("--rows", type=click.IntRange(1, ROWS_MAX), default=40, help="the terminal's rows")
@click.option(
    "--cols", type=click.IntRange(1, COLS_MAX), default=120, help="the terminal's columns"
)
@click.option("--agent", help="an agent preset (claude, codex, pi) for ready pattern and timing")
@click.option("--mail", "mail_file", type=click.File("r"), help="job: task mail (- for stdin)")
@click.option("--subject", default="", help="job: the task mail's subject")
@reply_to_option("job: owed a reply (repeat)")
@click.option("--key", help="job: the task's stable key (default: job-<session>)")
@click.option(
    "--deadline",
    callback=_duration,
    metavar="DURATION",
    help="end the session this long after the spawn (90s, 10m, 1h): a job replies "
    "interrupted, reason deadline",
)
@click.option(
    "--stall-after",
    callback=_duration,
    metavar="DURATION",
    help="job: mail the reply-to addresses when the child shows no output this long "
    "without a report (default: the daemon's --stall-after; 0s: never)",
)
@click.option(
    "--no-sandbox",
    is_flag=True,
    help="run it outside the sandbox (the operator only; see benchd --isolation)",
)
@click.option(
    "--mid-turn",
    is_flag=True,
    help="with --agent claude or pi: also hand mail over after each tool call, as "
    "added context (a hook per tool call), not only at the turn's end",
)
@click.argument("argv", nargs=-1, required=True)
def spawn(
    bench_dir: str | None,
    as_json: bool,
    name: str | None,
    cwd: str | None,
    env: tuple[str, ...],
    ready: str | None,
    rows: int,
    cols: int,
    agent: str | None,
    mail_file: TextIO | None,
    subject: str,
    reply_to: tuple[str, ...],
    key: str | None,
    deadline: float | None,
    stall_after: float | None,
    no_sandbox: bool,
    mid_turn: bool,
    argv: tuple[str, ...],
) -> None:
    """Start CMD in a pty owned by the daemon: bench spawn --name H -- CMD [ARGS]."""
    job = None
    if mail_file is not None:
        job = m.JobMailSpec(
            body=mail_file.read(), subject=subject, key=key, reply_to=list(reply_to)
        )
    elif reply_to or key or stall_after is not None:
        raise click.UsageError(
            "--reply-to, --key and --stall-after need --mail (a job's task mail)"
        )
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
        deadline=deadline,
        stall_after=stall_after,
        sandbox=not no_sandbox,
        mid_turn=mid_turn,
    )
    try:
        a = ask(bench_dir, req)
    except WireError as err:
        if agent is not None and err.message.startswith("no agent preset"):
            # The one probably meant, among the presets this side can name.
            err.message += hints.handle(agent, team.preset_names(resolve_dir(bench_dir)))
        raise
    done(as_json, a, f"spawned {a.handle} (session {a.session}, pid {a.pid})")


spawn.epilog = examples(
    "bench spawn --name alice -- claude",
    "bench spawn --name alice --agent claude -- claude",
    "bench spawn --name w1 --cwd ~/src/app --env FOO=1 --ready 'standin>' -- python agent.py",
    "bench spawn --name child --mail TASK.md --reply-to parent -- CMD",
    "bench spawn --mail TASK.md --name reviewer --reply-to alice --reply-to bob@node2 -- codex",
    "bench spawn --name w2 --deadline 1h -- python agent.py",
    "bench spawn --name top --no-sandbox -- htop",
    "bench spawn --name w3 --agent claude --mid-turn -- claude",
    "bench spawn --mail TASK.md --deadline 1h --stall-after 15m -- CMD",
)


def _exit_text(s: Json) -> str:
    if s.get("exit") is not None:
        return str(s["exit"])
    if s.get("signal") is not None:
        return output.signal_name(s["signal"])
    return "-"


def _state_colour(s: Json) -> str | None:
    if s["state"] == "running":
        return "green"
    return None if s.get("exit") == 0 else "red"


@click.command()
@common
@click.argument("name", required=False, shell_complete=complete_sessions)
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
def ps(
    bench_dir: str | None,
    as_json: bool,
    name: str | None,
    show_all: bool,
    quiet: bool,
    prune: bool,
    tree: bool,
) -> None:
    """List live sessions: handle, session id, pid, state, idle time, exit."""
    if prune:
        pruned = ask(bench_dir, m.SessionPrune())
        done(as_json, pruned, f"forgot {pruned.forgotten} exited sessions")
        return
    a = msgspec.to_builtins(ask(bench_dir, m.SessionList()))
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
    started_by = team.labels(resolve_dir(bench_dir))
    if as_json:
        rows = [
            dict(s, team=started_by[s["session"]]) if s["session"] in started_by else s
            for s in rows
        ]
        output.emit_json(dict(a, sessions=rows))
        return
    if quiet:
        if rows:
            output.write("\n".join(s["handle"] for s in rows))
        return
    if not rows:
        more = sum(1 for s in listed if s["state"] != "running")
        hint = f" ({more} exited: bench ps -a)" if more else ""
        output.write("no sessions, live or exited" if show_all else "no live sessions" + hint)
        return
    output.write(table(rows, tree, started_by, colour(as_json)))


def agent_text(a: Json) -> str:
    """An adapter session's agent state in a few characters: `idle`, `blocked Bash`,
    `limited 13:42` (`+screen`: seen on the screen), `?` before its first report."""
    state = a.get("state")
    if state is None:
        return "?"
    if state == "blocked" and a.get("tool"):
        return f"blocked {untrusted.escape(a['tool'])[:16]}"
    if state == "limited":
        until = a.get("until")
        at = time.strftime("%H:%M", time.localtime(until / 1000)) if until else "?"
        return f"limited {at}" + ("+screen" if a.get("source") == "screen" else "")
    return str(state)


ps.epilog = examples(
    "bench ps",
    "bench ps -a",
    "bench ps -q",
    "bench ps --tree -a",
    "bench ps s1a2b3c4d",
    "bench ps --prune",
)


@click.command()
@common
@click.argument("handle", metavar="NAME", shell_complete=complete_sessions)
@click.option("-f", "--follow", is_flag=True, help="keep printing live output")
@click.option("--screen", is_flag=True, help="print the current screen as text instead")
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(min=0),
    metavar="N",
    help="only the last N lines of the scrollback (or of the screen), as tail -n",
)
def tail(
    bench_dir: str | None,
    as_json: bool,
    handle: str,
    follow: bool,
    screen: bool,
    lines: int | None,
) -> None:
    """Print a session's output (by handle or id): the scrollback, then (-f) live."""
    out = sys.stdout.buffer
    req = m.SessionTail(handle=handle, follow=follow, screen=screen, lines=lines)
    with connect(bench_dir, timeout=None) as conn:
        frames = conn.stream(req)
        for a in frames:
            if as_json:
                output.emit_json(a)
                sys.stdout.flush()
            elif isinstance(a, m.OutputFrame):
                out.write(base64.b64decode(a.data))
                out.flush()
            else:
                output.write("\n".join(a.lines).rstrip("\n"))
        if as_json and frames.end is not None:
            output.emit_json(frames.end)  # --json shows every frame, the end frame too


tail.epilog = examples(
    "bench tail alice",
    "bench tail alice -f",
    "bench tail alice --screen",
    "bench tail -n 20 alice -f       # the last 20 lines, then live",
    "bench tail s1a2b3c4d          # a past session, by id",
)


@click.command()
@click.option("--dir", "bench_dir", metavar="PATH", help=DIR_HELP)
@click.option(
    "--json", "as_json", is_flag=True, help="errors before the terminal is joined as JSON"
)
@click.argument("handle", shell_complete=complete_handles)
def attach(bench_dir: str | None, as_json: bool, handle: str) -> None:
    """Join a session's terminal (raw mode). Detach with Ctrl-] (0x1d)."""
    bench_dir, as_json = given(bench_dir, as_json)
    if not os.isatty(0):
        raise WireError(
            "usage",
            "bench attach needs a terminal on standard input; to watch "
            "use bench tail -f, to write use bench type",
        )
    from bench_cli.attach import attach as run_attach

    sys.exit(run_attach(bench_dir, handle, as_json))


attach.epilog = examples("bench attach alice")


@click.command(name="type")
@common
@click.argument("handle", shell_complete=complete_handles)
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
def type_(bench_dir: str | None, as_json: bool, handle: str, text: str, no_enter: bool) -> None:
    """Write TEXT into a session's terminal, then Enter."""
    a = ask(bench_dir, m.SessionType(handle=handle, text=text, enter=not no_enter))
    done(as_json, a, f"typed {a.bytes} bytes into {handle}")


type_.epilog = examples('bench type alice "run the tests"', "bench type alice q --no-enter")


@click.command()
@common
@click.argument("handle", shell_complete=complete_handles)
@click.option("--cancel", is_flag=True, help="cancel its job: no replies are sent")
@click.option("--tree", is_flag=True, help="also every session it spawned, children first")
def kill(bench_dir: str | None, as_json: bool, handle: str, cancel: bool, tree: bool) -> None:
    """End a session: SIGHUP, then SIGTERM, then SIGKILL, 1.5 s apart."""
    # A tree ends a level at a time, each level up to 3 grace periods: allow for a deep one.
    a = ask(bench_dir, m.SessionKill(handle=handle, cancel=cancel, tree=tree), timeout=120.0)
    more = len(a.ended) - 1
    also = f" and {more} below it" if more > 0 else ""
    done(as_json, a, f"ended {a.handle} (session {a.session}){also}")


kill.epilog = examples("bench kill alice", "bench kill child --cancel", "bench kill --tree alice")


@click.command()
@common
@click.argument("handle", metavar="NAME", shell_complete=complete_sessions)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="K=V",
    help="an environment entry it was started with (repeat): bench keeps their names only",
)
def restart(bench_dir: str | None, as_json: bool, handle: str, env: tuple[str, ...]) -> None:
    """End a session (if it runs) and start it again: the same handle, command, working
    directory, preset, ready pattern, size and sandbox (by handle or id, live or exited)."""
    d = resolve_dir(bench_dir)
    listed = ask(d, m.SessionList()).sessions
    live = [s for s in listed if s.state == "running" and handle in (s.handle, s.session)]
    gone = [s for s in reversed(listed) if s.state != "running" and handle in (s.handle, s.session)]
    if not live and not gone:
        raise WireError("no-such-session", f"no session, live or exited, is called {handle!r}")
    s = (live or gone)[0]
    rec = team.records(d).get(s.session)
    entry = rec.get("entry") if rec is not None else None
    given = _env_pairs(env)
    if isinstance(entry, dict) and isinstance(entry.get("env"), dict):
        given = {**{str(k): str(v) for k, v in entry["env"].items()}, **given}
    launch = s.launch
    if launch is None:
        raise WireError(
            "usage",
            f"the daemon does not say how {s.handle} was started (it ran under an older "
            f"benchd): bench kill {s.handle}, then bench spawn it again",
        )
    missing = [k for k in launch.env_keys if k not in given]
    if missing:
        raise WireError(
            "usage",
            f"{s.handle} was started with --env {', '.join(missing)}; bench keeps their "
            f"names, not their values: give them again (bench restart {handle} "
            + " ".join(f"--env {k}=..." for k in missing)
            + "); nothing was ended",
        )
    if s.state == "running":
        ask(d, m.SessionKill(handle=s.session), timeout=120.0)
    # Its launch is the spawn's own fields, but the environment's values (given again).
    how = {k: v for k, v in msgspec.structs.asdict(launch).items() if k != "env_keys"}
    a = ask(d, m.Spawn(**how, name=s.handle, env=given))
    if rec is not None:  # still its team's: `bench ps` and `bench up -f` know it
        team.relabel(d, s.session, a.session)
    note = "\n(its job's task is not sent again)" if s.job else ""
    done(
        as_json,
        a,
        f"restarted {a.handle}: session {a.session}, pid {a.pid}, in {launch.cwd}: "
        f"{shlex.join(launch.argv)}{note}",
    )


restart.epilog = examples(
    "bench restart alice",
    "bench restart s1a2b3c4d          # an exited session, by id",
    "bench restart alice --env API_KEY=...",
)


@click.command()
@common
@click.argument("text", required=False)
def report(bench_dir: str | None, as_json: bool, text: str | None) -> None:
    """Inside a job: record the content owed to its correspondents (TEXT or -)."""
    entry.from_click(("report",), bench_dir, as_json, text=text)


report.epilog = examples(
    'bench report "Fixed it: the fixture was missing."', 'echo "long report" | bench report -'
)


@click.command()
@common
@click.argument("event", type=click.Choice(verbs.HOOK_EVENTS))
def hook(bench_dir: str | None, as_json: bool, event: str) -> None:
    """Run by an agent's own hook (its adapter sets it up): report EVENT, its JSON on
    standard input, and print the daemon's answer for the agent (--json: no change,
    the answer is the agent's to read)."""
    entry.from_click(("hook",), bench_dir, as_json, event=event)


def _answer(
    bench_dir: str | None, as_json: bool, handle: str, allow: bool, reason: str | None
) -> None:
    a = ask(bench_dir, m.AgentAnswer(handle=handle, allow=allow, reason=reason))
    what = "approved" if allow else "denied"
    tool = f" {untrusted.escape(a.tool)}" if a.tool else ""
    how = "" if a.via == "hook" else " (typed into its dialog)"
    done(as_json, a, f"{what}{tool} for {a.handle} (session {a.session}){how}")


@click.command()
@common
@click.argument("handle", shell_complete=complete_handles)
def approve(bench_dir: str | None, as_json: bool, handle: str) -> None:
    """Allow what HANDLE's agent waits to do (its approval prompt; see bench ps)."""
    _answer(bench_dir, as_json, handle, True, None)


approve.epilog = examples("bench approve worker")


@click.command()
@common
@click.argument("handle", shell_complete=complete_handles)
@click.option("-m", "--message", "reason", metavar="REASON", help="told to the agent")
def deny(bench_dir: str | None, as_json: bool, handle: str, reason: str | None) -> None:
    """Refuse what HANDLE's agent waits to do; it is told why (-m) and goes on."""
    _answer(bench_dir, as_json, handle, False, reason)


deny.epilog = examples('bench deny worker -m "no network: use the fixture"')


@click.command()
@click.option("--dir", "bench_dir", metavar="PATH", help="BENCH_DIR")
def dash(bench_dir: str | None) -> None:
    """The operator's live dashboard: sessions, screens, mail, events (needs bench[dash])."""
    # Anything but a terminal would get escape codes in a file, or an app no one can quit.
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
