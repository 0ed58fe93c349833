"""The team file of `bench up -f` and its record, team.json: see docs/team.md. The record
is a label, not an authority: nothing is decided by it but what `up` reports and what
`down -f` stops."""

import json
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from bench_cli import hints, output
from bench_cli.context import Json
from bench_wire import messages as m
from bench_wire.addresses import is_address, is_handle
from bench_wire.config import BY_FLAG, OPTIONS, option_problem
from bench_wire.errors import WireError

DEFAULT_FILE = "bench.toml"
RECORD = "team.json"
FILE_MAX = 1 << 20  # a team file larger than 1 MiB is refused, not read
AGENTS_MAX = 256  # agents one file may name
# benchd's terminal sizes (benchd.runtime.terminal's MAX_ROWS x MAX_COLS): checked here
# too, so a bad size stops the file before any agent starts.
ROWS_MAX, COLS_MAX = 500, 1000
# benchd's built-in presets (benchd.runtime.sessions.BUILTIN_PRESETS).
BUILTIN_PRESETS = ("claude", "codex", "pi")
# Files that mark a directory as a BENCH_DIR: a task file is never read from under one.
BENCH_DIR_MARKS = ("benchd.lock", "benchd.sock", "events.jsonl")

# key -> (what the value must be, as said in an error)
AGENT_KEYS = {
    "command": "a string or a list of strings",
    "agent": "a string",
    "cwd": "a string",
    "env": "a table of strings",
    "ready": "a string",
    "rows": "an integer",
    "cols": "an integer",
    "task": "a string",
    "task-file": "a string",
    "subject": "a string",
    "reply-to": "a string or a list of strings",
    "key": "a string",
    "deadline": "a duration",
    "stall-after": "a duration",
    "mid-turn": "a boolean",
}

# The [daemon] table by field name, as @daemon_options passes it (node, bridge_url: str).
DaemonValues = dict[str, int | float | str]

# The CLI's request helper (bench_cli.context.call).
Call = Callable[[str, m.Request], Json]


class Result(TypedDict):
    """What `bench up -f` did for one agent."""

    name: str
    status: str  # started, running or changed
    session: str
    pid: int
    from_file: NotRequired[bool]  # running or changed: whether this file started it
    changed: NotRequired[list[str]]  # changed: the keys (or the file) that differ


class Ended(TypedDict):
    """A session `bench down -f` ended."""

    name: str
    session: str
    pid: int


@dataclass(frozen=True)
class Agent:
    name: str
    line: int  # of its [agents.NAME] header
    spawn: m.Spawn  # what `bench up -f` asks of the daemon for it

    def entry(self) -> dict[str, object]:
        """The agent's values under the file's keys: recorded, and compared with a
        running session's record."""
        s, job = self.spawn, self.spawn.job
        return {
            "command": s.argv,
            "agent": s.agent,
            "cwd": s.cwd,
            "env": s.env,
            "ready": s.ready,
            "rows": s.rows,
            "cols": s.cols,
            "task": job.body if job else None,
            "subject": job.subject if job else "",
            "reply-to": job.reply_to if job else [],
            "key": job.key if job else None,
            "deadline": s.deadline,
            "stall-after": s.stall_after,
            "mid-turn": s.mid_turn,
        }


@dataclass
class Team:
    path: str  # absolute
    daemon: DaemonValues
    agents: list[Agent]


# ---------------------------------------------------------------- reading the file


class _Source:
    """The file's text, to find the line a key is on (tomllib gives values, no lines)."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def error(self, line: int, key: str, what: str) -> WireError:
        return WireError("bad-team-file", f"{self.path}:{line}: {key}: {what}")

    def header(self, table: tuple[str, ...]) -> int:
        """The line of `[a.b]` (1-based); 0 when the table has no header of its own."""
        parts = r"\s*\.\s*".join(_key_pattern(p) for p in table)
        pat = re.compile(rf"^\s*\[\s*{parts}\s*\]")
        for i, line in enumerate(self.lines):
            if pat.match(line):
                return i + 1
        return 0

    def line_of(self, table: tuple[str, ...], key: str) -> int:
        """The line of `key = ...` in `table` (else its header's line, or 1)."""
        start = self.header(table) if table else 0
        pat = re.compile(rf"^\s*{_key_pattern(key)}\s*=")
        for i in range(start, len(self.lines)):
            text = self.lines[i]
            if text.lstrip().startswith("["):
                break  # the next table
            if pat.match(text):
                return i + 1
        # A dotted key (`agents.alice.cwd = ...`) or an inline table: the key's name.
        loose = re.compile(rf"(^|[.{{,\s]){_key_pattern(key)}\s*=")
        for i, text in enumerate(self.lines):
            if loose.search(text):
                return i + 1
        return start or 1

    def table_at(self, line: int) -> str:
        """The table the given line lies in, as a dotted name ('' at the top)."""
        for text in reversed(self.lines[: max(line, 1)]):
            got = re.match(r"^\s*\[+\s*([^\]]+?)\s*\]", text)
            if got:
                return got.group(1).replace('"', "").replace(" ", "")
        return ""


def _key_pattern(key: str) -> str:
    q = re.escape(key)
    return rf"(?:{q}|\"{q}\"|'{q}')"


def find_file(given: str | None, dir_given: bool = False) -> str | None:
    """-f's file, else ./bench.toml when it exists and no --dir was given (docs/team.md,
    "Which file"), else None."""
    if given is not None:
        return os.path.abspath(given)
    if dir_given:
        return None
    return os.path.abspath(DEFAULT_FILE) if os.path.isfile(DEFAULT_FILE) else None


def shown(path: str) -> str:
    """A path relative when under the current directory, else absolute."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def load(path: str, bench_dir: str | None = None) -> Team:
    """The file read and checked whole, before anything starts: every problem is a
    bad-team-file naming file, line and key. `bench_dir` names more presets."""
    try:
        with open(path, "rb") as f:
            raw = f.read(FILE_MAX + 1)
    except OSError as err:
        raise WireError("bad-team-file", f"cannot read {path}: {err.strerror or err}") from None
    if len(raw) > FILE_MAX:
        raise WireError("bad-team-file", f"{path} is larger than {FILE_MAX:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise WireError("bad-team-file", f"{path} is not UTF-8 text ({err.reason})") from None
    src = _Source(path, text)
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise WireError(
            "bad-team-file", f"{path}: invalid TOML: arrays or tables nested too deeply"
        ) from None
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        at = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        end = re.search(r"\(at end of document\)", msg)
        line = int(at.group(1)) if at else len(src.lines) if end else 1
        cut = at or end
        reason = msg[: cut.start()].strip() if cut else msg
        where = src.table_at(line)
        here = src.lines[line - 1] if 0 < line <= len(src.lines) else ""
        key = here.split("=", 1)[0].strip() if "=" in here else ""
        name = ".".join(p for p in (where, key) if p) or "(top)"
        col = f", column {at.group(2)}" if at else ""
        raise src.error(line, name, f"invalid TOML: {reason}{col}") from None
    for k in doc:
        if k not in ("daemon", "agents"):
            raise src.error(
                src.header((k,)) or src.line_of((), k),
                k,
                "unknown key; a team file has [daemon] and [agents.NAME] tables"
                + hints.handle(k, ("daemon", "agents")),
            )
    daemon = _daemon(src, doc.get("daemon", {}))
    agents_doc = doc.get("agents", {})
    if not isinstance(agents_doc, dict):
        raise src.error(src.line_of((), "agents"), "agents", "must be tables [agents.NAME]")
    if len(agents_doc) > AGENTS_MAX:
        raise src.error(1, "agents", f"more than {AGENTS_MAX} agents in one file")
    base = os.path.dirname(path)
    presets = preset_names(bench_dir)
    agents = [_agent(src, base, name, entry, presets) for name, entry in agents_doc.items()]
    return Team(path=path, daemon=daemon, agents=agents)


def preset_names(bench_dir: str | None) -> set[str]:
    """The built-in presets and the names in `bench_dir`'s presets.json (benchd checks
    the presets themselves)."""
    names = set(BUILTIN_PRESETS)
    if bench_dir is None:
        return names
    try:
        # As benchd opens it (a link is followed there too): only names are taken.
        with open(os.path.join(bench_dir, "presets.json"), "rb") as f:
            doc = json.loads(f.read(FILE_MAX))
        if isinstance(doc, dict):
            names |= {k for k in doc if isinstance(k, str)}
    except (OSError, ValueError, RecursionError):
        pass  # none, or not one benchd would take: it says so at the spawn
    return names


def _daemon(src: _Source, doc: object) -> DaemonValues:
    if not isinstance(doc, dict):
        raise src.error(src.line_of((), "daemon"), "daemon", "must be a table [daemon]")
    options = {o.key: o for o in OPTIONS}
    out: DaemonValues = {}
    for k, v in doc.items():
        line = src.line_of(("daemon",), k)
        if k in ("node", "bridge"):
            if not isinstance(v, str):
                raise src.error(line, f"daemon.{k}", f"must be a string, not {_kind(v)}")
            out["node" if k == "node" else "bridge_url"] = v
            continue
        o = options.get(k)
        if o is None:
            known = [*options, "node", "bridge"]
            meant = hints.nearest(k, known)
            said = f"did you mean {meant}?" if meant else "the keys are bench help up's options"
            raise src.error(line, f"daemon.{k}", f"unknown key ({said})")
        ok = isinstance(v, int) and not isinstance(v, bool)
        if o.type is float:
            ok = ok or isinstance(v, float)
        if not ok:
            want = "an integer" if o.type is int else "a number"
            raise src.error(line, f"daemon.{k}", f"must be {want}, not {_kind(v)}")
        problem = option_problem(o.flag, v)
        if problem:
            raise src.error(line, f"daemon.{k}", problem)
        out[o.dest] = o.type(v)
    return out


def _agent(src: _Source, base: str, name: str, doc: object, presets: set[str]) -> Agent:
    table = ("agents", name)
    where = f"agents.{name}"
    head = src.header(table) or src.line_of(("agents",), name)
    if not isinstance(doc, dict):
        raise src.error(head, where, f"must be a table [agents.{name}], not {_kind(doc)}")
    if not is_handle(name):
        meant = name.lower() if is_handle(name.lower()) else None
        raise src.error(
            head,
            where,
            "the table's name is the session's handle: 1-64 characters of a-z 0-9 . _ - "
            "starting with a letter or digit"
            + (f" (did you mean agents.{meant}?)" if meant else ""),
        )
    if name == "operator":
        raise src.error(head, where, "operator is your own handle, never a session's")

    def bad(k: str, what: str) -> WireError:
        return src.error(src.line_of(table, k), f"{where}.{k}", what)

    for k, v in doc.items():
        if k not in AGENT_KEYS:
            meant = hints.nearest(k, AGENT_KEYS)
            tip = f"did you mean {meant}?" if meant else f"known: {', '.join(AGENT_KEYS)}"
            raise bad(k, f"unknown key ({tip})")
        if not _fits(k, v):
            raise bad(k, f"must be {AGENT_KEYS[k]}, not {_kind(v)}")
    command = doc.get("command")
    agent = doc.get("agent")
    if command is None and agent is None:
        raise src.error(head, where, "needs a command (or an agent preset to run by name)")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as err:
            raise bad("command", f"cannot be split like a shell line: {err}") from None
    else:
        argv = list(command) if command is not None else [str(agent)]
    if not argv or not argv[0]:
        raise bad("command", "must not be empty")
    if agent is not None and agent not in presets:  # the daemon's words, and a hint
        known = f"known: {', '.join(sorted(presets))}{hints.handle(agent, presets)}"
        raise bad("agent", f"no agent preset {agent!r}; {known}")
    rows, cols = doc.get("rows", 40), doc.get("cols", 120)
    if not 1 <= rows <= ROWS_MAX:
        raise bad("rows", f"must be 1 to {ROWS_MAX} (got {rows})")
    if not 1 <= cols <= COLS_MAX:
        raise bad("cols", f"must be 1 to {COLS_MAX} (got {cols})")
    for k, v in doc.get("env", {}).items():
        if not k or "=" in k or "\0" in k or "\0" in v:
            raise bad("env", f"{k!r} is not an environment variable's name and value")
    cwd = os.path.normpath(os.path.join(base, os.path.expanduser(doc.get("cwd", "."))))
    if not os.path.isdir(cwd):
        raise bad("cwd", f"{cwd} is not a directory")
    task = doc.get("task")
    if "task-file" in doc:
        if task is not None:
            raise bad("task-file", "give task or task-file, not both")
        try:
            task = read_task_file(base, doc["task-file"])
        except ValueError as err:
            raise bad("task-file", str(err)) from None
    reply_to = doc.get("reply-to", [])
    reply_to = [reply_to] if isinstance(reply_to, str) else list(reply_to)
    for k in ("reply-to", "subject", "key"):
        if k in doc and task is None:
            raise bad(k, "needs a task (the job's first mail)")
    for address in reply_to:
        if not is_address(address):
            meant = address.lower() if is_address(address.lower()) else None
            tip = f" (did you mean {meant}?)" if meant else ""
            raise bad("reply-to", f"{address!r} is not an address (bob, or bob@node2){tip}")
    durations: dict[str, float | None] = {}
    longest = BY_FLAG["--max-deadline"].high  # no daemon takes a longer one
    for k in ("deadline", "stall-after"):
        durations[k] = None
        if k in doc:
            try:
                durations[k] = output.parse_duration(doc[k], most=longest)
            except ValueError as err:
                raise bad(k, str(err)) from None
    job = None
    if task is not None:
        job = m.JobMailSpec(
            body=task, subject=doc.get("subject", ""), key=doc.get("key"), reply_to=reply_to
        )
    spawn = m.Spawn(
        argv=argv,
        name=name,
        cwd=cwd,
        env=dict(doc.get("env", {})),
        ready=doc.get("ready"),
        rows=rows,
        cols=cols,
        agent=agent,
        job=job,
        deadline=durations["deadline"],
        stall_after=durations["stall-after"],
        mid_turn=doc.get("mid-turn", False),
    )
    return Agent(name=name, line=head, spawn=spawn)


def read_task_file(base: str, given: str) -> str:
    """A task file's text, if it lies where docs/team.md says ("Task files stay in their
    lane"); else ValueError with a sentence. The path is checked as the kernel opened
    the file (/proc/self/fd), so a link swapped in meanwhile is seen."""
    import stat

    home = os.path.realpath(base)
    try:
        fd = os.open(os.path.join(base, os.path.expanduser(given)), os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ValueError(f"cannot read {given!r}: {why}") from None
    try:
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = os.path.realpath(os.path.join(base, given))
        named = given if real == os.path.join(base, given) else f"{given} ({real})"
        if os.path.commonpath([home, real]) != home:
            raise ValueError(
                f"{named} is outside the team file's directory {home}: a task file must "
                "lie under it, links followed"
            )
        where = _bench_dir_above(real)
        if where is not None:
            raise ValueError(f"{named} is inside the BENCH_DIR {where}: never a task")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{named} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(FILE_MAX + 1)
    except OSError as err:
        raise ValueError(f"cannot read {given!r}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if len(raw) > FILE_MAX:
        raise ValueError(f"{given} is larger than {FILE_MAX:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{given} is not UTF-8 text ({err.reason})") from None


def _bench_dir_above(path: str) -> str | None:
    """The nearest directory at or above `path` that is a BENCH_DIR, or None."""
    d = os.path.dirname(path)
    while True:
        if any(os.path.lexists(os.path.join(d, mark)) for mark in BENCH_DIR_MARKS):
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def _fits(k: str, v: object) -> bool:
    if k == "mid-turn":
        return isinstance(v, bool)
    if k in ("rows", "cols"):
        return isinstance(v, int) and not isinstance(v, bool)
    if k == "env":
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
    if k in ("command", "reply-to"):
        return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    return isinstance(v, str)


def _kind(v: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "a table"})
    return names.get(type(v), type(v).__name__)


# ---------------------------------------------------------------- the record


def records(bench_dir: str) -> dict[str, dict[str, object]]:
    """Session id -> {file, name, entry}. Any process of the user may have written it:
    each field is checked where used."""
    try:
        fd = os.open(os.path.join(bench_dir, RECORD), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read(FILE_MAX))
        got = doc.get("sessions", {})
        return {k: v for k, v in got.items() if isinstance(v, dict)}
    except (OSError, ValueError, AttributeError):
        return {}  # none yet, or unreadable: nothing is labelled


def _write_records(bench_dir: str, recs: dict[str, dict[str, object]]) -> None:
    """Replace team.json whole (a fresh O_EXCL file renamed over it: a link planted at
    either name is never followed). A failure costs only the labels: said on stderr."""
    import sys
    import tempfile

    path = os.path.join(bench_dir, RECORD)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".team.", dir=bench_dir)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"sessions": recs}, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        print(f"bench: warning: cannot record the team in {path}: {err}", file=sys.stderr)


# ---------------------------------------------------------------- up and down


def up(bench_dir: str, team: Team, call: Call) -> list[Result]:
    """Spawn each agent not running yet; what was done for each, in file order (a running
    one is left as it is: docs/team.md, "Running it again")."""
    listed = call(bench_dir, m.SessionList())["sessions"]
    running = {s["handle"]: s for s in listed if s["state"] == "running"}
    live_ids = {s["session"] for s in listed if s["state"] == "running"}
    recs = {k: v for k, v in records(bench_dir).items() if k in live_ids}
    results: list[Result] = []
    try:
        for agent in team.agents:
            s = running.get(agent.name)
            if s is None:
                try:
                    a = call(bench_dir, agent.spawn)
                except WireError as err:
                    if err.code != "handle-taken":
                        raise WireError(
                            err.code,
                            f"{team.path}:{agent.line}: agents.{agent.name}: {err.message}",
                        ) from None
                    # Started concurrently (another `bench up -f`): running now.
                    s = {"session": "?", "pid": 0, "argv": agent.spawn.argv}
                else:
                    recs[a["session"]] = {
                        "file": team.path,
                        "name": agent.name,
                        "entry": agent.entry(),
                    }
                    results.append(_result(agent, "started", a["session"], a["pid"]))
                    continue
            rec = recs.get(s["session"])
            if rec is not None and rec.get("name") == agent.name:
                want: Mapping[str, object] = agent.entry()
                have = rec.get("entry")
                have = have if isinstance(have, dict) else {}
                changed = [k for k in want if have.get(k) != want[k]]
                if rec.get("file") != team.path:
                    changed.insert(0, f"file {rec.get('file')}")
            else:
                changed = [] if list(s.get("argv") or []) == agent.spawn.argv else ["command"]
            status = "changed" if changed else "running"
            r = _result(agent, status, s["session"], s["pid"])
            r["from_file"] = rec is not None
            if changed:
                r["changed"] = changed
            results.append(r)
    finally:
        _write_records(bench_dir, recs)
    return results


def relabel(bench_dir: str, old: str, new: str) -> None:
    """Session `new` (`bench restart` of `old`) is its team file's entry now."""
    recs = records(bench_dir)
    if old in recs:
        recs[new] = recs.pop(old)
        _write_records(bench_dir, recs)


def _result(agent: Agent, status: str, session: str, pid: int) -> Result:
    return {"name": agent.name, "status": status, "session": session, "pid": pid}


def describe(results: list[Result], path: str) -> str:
    """The per-agent lines `bench up -f` prints, like `docker compose up`'s."""
    width = max((len(r["name"]) for r in results), default=0)
    name = shown(path)
    out = [f"team file {name}"]
    for r in results:
        head = f"{r['status']:<8} {r['name']:<{width}}  session {r['session']}, pid {r['pid']}"
        if r["status"] == "running" and not r.get("from_file", True):
            head += " (not started from this file)"
        if r["status"] == "changed":
            head += (
                f": its entry differs ({', '.join(r['changed'])}); left running as it is "
                f"(bench kill {r['name']}, then bench up -f {name}, to start it anew)"
            )
        out.append(head)
    return "\n".join(out) if results else f"team file {name}: no agents in it"


def down(bench_dir: str, team: Team, call: Call) -> list[Ended]:
    """End the running sessions this file started (its agents' names, by the record)."""
    listed = call(bench_dir, m.SessionList())["sessions"]
    live = {s["session"]: s for s in listed if s["state"] == "running"}
    names = {a.name for a in team.agents}
    ended: list[Ended] = []
    for sid, rec in records(bench_dir).items():
        s = live.get(sid)
        if s is None or rec.get("file") != team.path or rec.get("name") not in names:
            continue
        if s["handle"] != rec.get("name"):
            continue
        try:
            call(bench_dir, m.SessionKill(handle=sid))
        except WireError as err:
            if err.code != "no-such-session":  # ended meanwhile: what was asked
                raise
        ended.append({"name": s["handle"], "session": sid, "pid": s["pid"]})
    return ended


def labels(bench_dir: str) -> dict[str, str]:
    """Session id -> the team file that started it (for `bench ps`)."""
    return {sid: str(r.get("file")) for sid, r in records(bench_dir).items() if r.get("file")}
