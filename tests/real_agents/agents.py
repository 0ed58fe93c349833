"""Real agent CLIs (Claude Code, pi, Codex) against the scripted model server.

API
---
- ``ensure_installed(cache_dir=None, timeout=600) -> Path``: npm-install the three CLIs
  into the per-user ``$XDG_CACHE_HOME/bench/agents`` (or cache_dir) unless already there
  (an install in the clone's ``.cache/agents`` is used too); returns
  ``node_modules/.bin``. Raises ``AgentsUnavailable`` quickly when npm is missing or the
  registry does not answer (``registry_reachable()``: ``npm view @openai/codex
  version`` with a timeout, no retries), or when the install fails.
- ``installed_bin_dir(cache_dir=None) -> Path | None``, ``versions(bin_dir) -> dict``.
- ``prepare(kind, home, port, cwd, bin_dir=None, extra_path=()) -> AgentSpec`` (also
  ``prepare_claude/pi/codex``): writes a throwaway HOME for that agent and returns
  ``argv``, a complete ``env`` (not to be merged with os.environ), ``ready_re``,
  ``settle``, ``enter_delay``, ``alt_screen`` and ``shell_command()`` (``exec env -i
  ... argv``, handy for tmux). ``extra_path`` goes first on PATH (the ``bench`` to use).
- ``use_bench_mcp(spec)``: give a prepared Claude Code or Codex `bench mcp` as its MCP
  server (what ``bench mcp --print-config`` prints) and take its shell tool away;
  ``mcp_connected(kind, home)`` tells when it has connected (from the agent's own log).
  pi has no MCP client (``MCP_KINDS``).

Verified here (tmux 3.3a, 160x48 and 80x24, Node 20, offline but for the scripted
server; ``just mail-proof-real`` runs the ring through them). Versions: Claude
Code 2.1.197 (npm's ``latest`` tag says 2.1.332 but ``npm install`` resolved 2.1.197
here), pi 0.73.1 (@mariozechner/pi-coding-agent), codex-cli 0.171.0. Install: 22 s,
862 MB; npm 11 warns that install scripts (claude-code postinstall, koffi, protobufjs)
were not run; all three binaries work anyway (``claude`` is an ELF ``claude.exe``).

The proof: mail file ``.../mail/alice/read/1.md`` (YAML front matter, body
``number 100``), a fake ``bench`` first on PATH logging its argv, ring alice=bob, the
line ``You have mail from operator: <path>`` typed with ``send-keys -l``, then a
separate ``Enter``. All three ran the tool call and the fake bench got
``mail send bob -m number 101`` (over 30 runs in all, every one passing), then the
final text ``done`` showed on screen.

Claude Code
  - Setup: ``~/.claude.json`` {hasCompletedOnboarding, theme "dark",
    projects[cwd].hasTrustDialogAccepted}; ``~/.claude/settings.json``
    permissions.allow [Bash, Read, Write, Edit]; env ANTHROPIC_BASE_URL,
    ANTHROPIC_AUTH_TOKEN (bearer: no "use this key?" prompt), ANTHROPIC_MODEL,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_AUTOUPDATER=1. No dialog seen.
  - Ready: ``? for shortcuts`` (footer "? for shortcuts · ← for agents") at 0.5-0.75 s
    (1.0 s on the first, cold launch). The hint disappears while the input box holds
    text, so the pattern also means "input box empty". Primary screen (no alternate
    screen); turns bracketed paste on (ESC[?2004h) and leaves it on.
  - Requests: ``HEAD /`` at startup; per submitted line ``POST /v1/messages?beta=true``
    (stream) three times: a tool-less title request (system asks for a sentence-case
    title, the line wrapped in ``<session>``), the main request (27 tools), and the
    follow-up after the tool. Messages: [user (a <system-reminder> text block + the
    line), role "system" (agent list), assistant tool_use, user tool_result]. Tool
    ``Bash``, input_schema properties command (string), timeout, description, ...; we
    send {"command": ...}. No count_tokens call seen.
  - Enter after ready +0/0.5/1 s and 0-300 ms after the text: always submitted (no
    need for the ~1 s extra wait from earlier notes, 0.5 s kept for margin). Text and
    ``\\r`` in ONE write: the Enter was swallowed for the 80-char wake line (2/2 plain,
    1/2 with bracketed paste; a short "hello world\\r" went through); the text stays
    in the box and a retried Enter submitted exactly the line (no stray newline).
  - Writes task output under ``$TMPDIR/claude-<uid>/<cwd-slug>/``: TMPDIR is set inside
    the throwaway HOME.

pi
  - Setup: ``~/.pi/agent/models.json`` provider "bench" (openai-completions, baseUrl
    http://127.0.0.1:PORT/v1, any apiKey, compat supportsDeveloperRole/
    supportsReasoningEffort false, model "scripted"); ``PI_OFFLINE=1 pi --provider bench
    --model scripted``. No dialog. Prints "fd not found. Offline mode enabled, skipping
    download." and the same for ripgrep at start (harmless).
  - Ready: the usage gauge ``0.0%/128k (auto)`` at 0.96-1.34 s. It stays on screen
    while busy and while the box holds text: it only means "started". Primary screen;
    bracketed paste on.
  - Requests: ``POST /v1/chat/completions`` stream with stream_options.include_usage,
    twice per line (no title request). Messages: system, user (content list of text
    parts), assistant tool_calls, role "tool". Tools read, bash, edit, write; ``bash``
    parameters {command (required), timeout}; we send {"command": ...}.
  - Enter at any delay, in the same write, bracketed or not: always submitted.
  - Text typed before pi is up is echoed raw by the tty and then shown in the input
    box; an Enter typed before it is up is LOST (text stays, would glue to the next
    line).

Codex
  - Setup: ``$CODEX_HOME/config.toml`` (model, model_provider, approval_policy never,
    sandbox_mode danger-full-access, check_for_update_on_startup false, provider with
    base_url .../v1, env_key, wire_api "responses", cwd trust_level trusted,
    notice.hide_full_access_warning, analytics off); ``codex --no-daemon``. No dialog.
  - Ready: ``? for shortcuts`` shows at ~0.34 s while the header still says "loading";
    the footer ``← for agents · ? for shortcuts`` and the status line ``scripted default
    · <cwd>`` follow at 0.66-0.73 s, so the pattern is ``for agents · \\? for shortcuts``
    (footer hint hidden while the composer holds text). Typing during "loading"
    worked anyway. Alternate screen (ESC[?1049h; tmux alternate_on=1); bracketed paste
    on.
  - Footer shows "⚠ 1 warning · f2 to view": "Model metadata for `scripted` not found.
    Defaulting to fallback metadata" (harmless).
  - Requests: ``POST /v1/responses`` stream, three per line: main (13 tools), a
    tool-less title request (last user message "Generate a concise, single-line task
    title ..."), follow-up. Input: developer messages, a user ``<environment_context>``
    message, the user line, then function_call + function_call_output ("Chunk ID ...
    Process exited with code N ... Output: ..."). Tool ``exec_command`` parameters
    {cmd (required), workdir, shell, login, tty, yield_time_ms, max_output_tokens,
    sandbox_permissions, justification, prefix_rule}; we send {"cmd": ...}.
  - GOTCHA: commands run in a login shell that Codex snapshots; /etc/profile resets PATH
    (root: /usr/local/sbin:/usr/local/bin:...), so a ``bench`` only on our PATH was
    "command not found" (exit 127). Fixed by ``~/.bash_profile``/``~/.profile``
    re-exporting the prepared PATH (written for every agent).
  - GOTCHA: Enter as a separate write right after the text (0 ms, a few ms apart) was
    turned into nothing 3/3 (text stays in the composer; a retried Enter 2 s later
    submitted the line, no stray newline); 50, 100, 150, 200 ms: 3/3 each submitted.
    Text + ``\\r`` in one write: swallowed 2/2. Bracketed paste (ESC[200~..ESC[201~,
    or tmux ``paste-buffer -p``) + Enter at 0 ms or even in the same write: 2/2 ok.
  - With HOME under /tmp and TMPDIR=/tmp it prints "WARNING: proceeding, even though we
    could not create PATH aliases: Refusing to create helper binaries under temporary
    dir" before switching screens; gone with TMPDIR inside HOME.

All three
  - Typing ``send-keys -l`` text, ~200-300 ms, then ``Enter``: 100% submitted.
    Bracketed paste then a separate Enter: 100%. Retrying Enter (never the text) fixed
    every swallowed Enter.
  - Text typed 0.15 s after launch was not lost by any of them (kept in the tty buffer
    and shown in the box); text + Enter both typed before ready: Claude and Codex
    submitted it once up, pi kept the text and lost the Enter.
  - Enter to the fake bench having run: Claude 0.15-0.3 s, pi 0.1-0.15 s, Codex
    0.1-0.2 s (50 ms polling); typed text to tool done 0.36-0.56 s.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def user_cache() -> Path:
    """Where the agent CLIs are installed: once per user (about 860 MB), shared by every
    clone: $XDG_CACHE_HOME/bench/agents, else ~/.cache/bench/agents."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bench" / "agents"


DEFAULT_CACHE = user_cache()
# Where earlier versions installed them, inside the clone: still used when it holds them.
CLONE_CACHE = REPO / ".cache" / "agents"
PACKAGES = ("@anthropic-ai/claude-code", "@mariozechner/pi-coding-agent", "@openai/codex")
BINARIES = {"claude": "claude", "pi": "pi", "codex": "codex"}
KINDS = ("claude", "pi", "codex")

MODEL = "scripted"  # the model name every agent is told to use
FAKE_KEY = "sk-bench-scripted"  # any value; the scripted server ignores it


class AgentsUnavailable(RuntimeError):
    """The agent CLIs are not installed and cannot be installed (no npm / no registry)."""


# --------------------------------------------------------------------------- install


def registry_reachable(timeout: float = 20.0) -> bool:
    """True if ``npm view @openai/codex version`` answers within timeout seconds."""
    npm = shutil.which("npm")
    if npm is None:
        return False
    try:
        r = subprocess.run(
            [
                npm,
                "view",
                "@openai/codex",
                "version",
                "--fetch-retries=0",
                f"--fetch-timeout={int(timeout * 1000)}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (subprocess.TimeoutExpired, OSError):
        return False
    return r.returncode == 0 and bool(r.stdout.strip())


def installed_bin_dir(cache_dir: str | Path | None = None) -> Path | None:
    """The ``node_modules/.bin`` dir if all three CLIs are already there, else None.

    Without cache_dir: the per-user cache, else an install left in the clone's .cache."""
    for cache in [cache_dir] if cache_dir else [DEFAULT_CACHE, CLONE_CACHE]:
        bin_dir = Path(cache) / "node_modules" / ".bin"
        if all((bin_dir / b).exists() for b in BINARIES.values()):
            return bin_dir
    return None


def ensure_installed(cache_dir: str | Path | None = None, timeout: float = 600.0) -> Path:
    """Install the three CLIs into cache_dir if absent; return their bin dir.

    Raises AgentsUnavailable with a clear message if npm is missing, the registry does
    not answer (checked first, quickly) or the install fails.
    """
    cache = Path(cache_dir or DEFAULT_CACHE)
    found = installed_bin_dir(cache_dir)
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise AgentsUnavailable("npm is not on PATH: cannot install the agent CLIs")
    if not registry_reachable():
        raise AgentsUnavailable(
            "the npm registry does not answer (npm view @openai/codex version timed out "
            f"or failed); cannot install {', '.join(PACKAGES)} into {cache}"
        )
    cache.mkdir(parents=True, exist_ok=True)
    # One install at a time into one cache: tests run in parallel workers (and other
    # runs share the per-user cache), and two npm installs in one prefix fail (ENOTEMPTY).
    with open(str(cache) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = installed_bin_dir(cache)  # the install that held the lock made it
        if found is not None:
            return found
        try:
            r = subprocess.run(
                [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", *PACKAGES],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise AgentsUnavailable(f"npm install timed out after {timeout:.0f}s") from e
    found = installed_bin_dir(cache)
    if r.returncode != 0 or found is None:
        tail = (r.stderr or r.stdout)[-2000:]
        raise AgentsUnavailable(f"npm install failed (exit {r.returncode}):\n{tail}")
    return found


def versions(bin_dir: str | Path) -> dict[str, str]:
    """``--version`` output of each CLI (its last line, e.g. "codex-cli 0.171.0")."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="agent-versions-") as home:
        env = _base_env(Path(home), Path(bin_dir), ())
        env["CODEX_HOME"] = home
        for kind, exe in BINARIES.items():
            try:
                r = subprocess.run(
                    [str(Path(bin_dir) / exe), "--version"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=env,
                )
                out[kind] = (r.stdout.strip() or r.stderr.strip()).splitlines()[-1]
            except (OSError, subprocess.TimeoutExpired, IndexError) as e:
                out[kind] = f"error: {e!r}"
    return out


# --------------------------------------------------------------------------- launch specs


@dataclass
class AgentSpec:
    """How to run one agent interactively, and how to tell it is ready for input."""

    kind: str
    argv: list[str]
    env: dict[str, str]  # complete environment (not to be merged with os.environ)
    cwd: Path
    home: Path
    ready_re: re.Pattern[str]  # matched against the visible screen text
    settle: float  # seconds to wait after ready_re first matches before typing
    enter_delay: float  # minimum seconds between the typed text and its Enter
    alt_screen: bool  # whether the TUI switches to the alternate screen

    def shell_command(self) -> str:
        """One ``sh`` line that runs the agent with exactly env (e.g. for tmux)."""
        envs = [f"{k}={v}" for k, v in self.env.items()]
        return "exec " + shlex.join(["env", "-i", *envs, *self.argv])


READY = {
    # Claude: footer hint; it disappears while the input box holds text.
    "claude": re.compile(r"\? for shortcuts"),
    # pi: the context-usage gauge of the status line, e.g. "0.0%/128k (auto)".
    "pi": re.compile(r"\d+(?:\.\d+)?%/\d+k"),
    # Codex: the footer once loading is over ("? for shortcuts" alone shows while
    # the header still says "loading"); it disappears while the composer holds text.
    "codex": re.compile(r"for agents · \? for shortcuts"),
}
SETTLE = {"claude": 0.5, "pi": 0.2, "codex": 0.2}
ENTER_DELAY = {"claude": 0.2, "pi": 0.2, "codex": 0.2}
ALT_SCREEN = {"claude": False, "pi": False, "codex": True}


def _base_env(home: Path, bin_dir: Path, extra_path: Iterable[str | Path]) -> dict[str, str]:
    node_dir = Path(shutil.which("node") or "/usr/bin/node").parent
    path = [str(p) for p in extra_path] + [str(bin_dir), str(node_dir)]
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    seen: list[str] = []
    for p in path:
        if p not in seen:
            seen.append(p)
    return {
        "PATH": os.pathsep.join(seen),
        "HOME": str(home),
        "USER": os.environ.get("USER", "bench"),
        "SHELL": "/bin/bash",
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        # Claude Code writes task output under $TMPDIR/claude-<uid>/: keep it in HOME.
        "TMPDIR": str(home / "tmp"),
    }


def _write_shell_profiles(home: Path, env: dict[str, str]) -> None:
    """Login shells (Codex runs ``bash -lc`` and snapshots it) keep our PATH.

    /etc/profile resets PATH; ~/.bash_profile and ~/.profile in the throwaway HOME
    put the prepared PATH back, so a fake or venv ``bench`` stays first.
    """
    line = f"export PATH={shlex.quote(env['PATH'])}\n"
    for name in (".bash_profile", ".profile", ".bashrc"):
        (home / name).write_text(line, encoding="utf-8")


def _write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _spec(kind: str, argv, env, cwd: Path, home: Path) -> AgentSpec:
    _write_shell_profiles(home, env)
    Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    return AgentSpec(
        kind=kind,
        argv=argv,
        env=env,
        cwd=cwd,
        home=home,
        ready_re=READY[kind],
        settle=SETTLE[kind],
        enter_delay=ENTER_DELAY[kind],
        alt_screen=ALT_SCREEN[kind],
    )


def prepare_claude(
    home: str | Path,
    port: int,
    cwd: str | Path,
    bin_dir: str | Path,
    extra_path: Iterable[str | Path] = (),
) -> AgentSpec:
    """A throwaway HOME for Claude Code: onboarding done, cwd trusted, Bash allowed."""
    home, cwd, bin_dir = Path(home), Path(cwd).resolve(), Path(bin_dir)
    home.mkdir(parents=True, exist_ok=True)
    _write_json(
        home / ".claude.json",
        {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "autoUpdates": False,
            "projects": {
                str(cwd): {
                    "hasTrustDialogAccepted": True,
                    "hasCompletedProjectOnboarding": True,
                    "allowedTools": [],
                }
            },
        },
    )
    _write_json(
        home / ".claude" / "settings.json",
        {"permissions": {"allow": ["Bash", "Read", "Write", "Edit"]}},
    )
    env = _base_env(home, bin_dir, extra_path)
    env.update(
        {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_AUTH_TOKEN": FAKE_KEY,
            "ANTHROPIC_MODEL": MODEL,
            "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
    )
    return _spec("claude", [str(bin_dir / "claude")], env, cwd, home)


PI_PROVIDER = "bench"


def prepare_pi(
    home: str | Path,
    port: int,
    cwd: str | Path,
    bin_dir: str | Path,
    extra_path: Iterable[str | Path] = (),
) -> AgentSpec:
    """A throwaway HOME for pi with one chat-completions provider on the scripted server."""
    home, cwd, bin_dir = Path(home), Path(cwd).resolve(), Path(bin_dir)
    home.mkdir(parents=True, exist_ok=True)
    _write_json(
        home / ".pi" / "agent" / "models.json",
        {
            "providers": {
                PI_PROVIDER: {
                    "baseUrl": f"http://127.0.0.1:{port}/v1",
                    "api": "openai-completions",
                    "apiKey": FAKE_KEY,
                    "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                    "models": [{"id": MODEL, "name": MODEL, "contextWindow": 128000}],
                }
            }
        },
    )
    env = _base_env(home, bin_dir, extra_path)
    env.update({"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})
    argv = [str(bin_dir / "pi"), "--provider", PI_PROVIDER, "--model", MODEL]
    return _spec("pi", argv, env, cwd, home)


CODEX_PROVIDER = "bench"
CODEX_KEY_ENV = "BENCH_SCRIPTED_API_KEY"


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def prepare_codex(
    home: str | Path,
    port: int,
    cwd: str | Path,
    bin_dir: str | Path,
    extra_path: Iterable[str | Path] = (),
) -> AgentSpec:
    """A throwaway HOME + CODEX_HOME for Codex: responses provider, no approvals, trusted."""
    home, cwd, bin_dir = Path(home), Path(cwd).resolve(), Path(bin_dir)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = f"""\
model = {_toml_str(MODEL)}
model_provider = {_toml_str(CODEX_PROVIDER)}
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{CODEX_PROVIDER}]
name = "bench scripted"
base_url = {_toml_str(f"http://127.0.0.1:{port}/v1")}
env_key = {_toml_str(CODEX_KEY_ENV)}
wire_api = "responses"

[projects.{_toml_str(str(cwd))}]
trust_level = "trusted"

[notice]
hide_full_access_warning = true

[analytics]
enabled = false
"""
    (codex_home / "config.toml").write_text(config, encoding="utf-8")
    env = _base_env(home, bin_dir, extra_path)
    env.update({"CODEX_HOME": str(codex_home), CODEX_KEY_ENV: FAKE_KEY})
    return _spec("codex", [str(bin_dir / "codex"), "--no-daemon"], env, cwd, home)


PREPARE = {"claude": prepare_claude, "pi": prepare_pi, "codex": prepare_codex}


def prepare(
    kind: str,
    home: str | Path,
    port: int,
    cwd: str | Path,
    bin_dir: str | Path | None = None,
    extra_path: Iterable[str | Path] = (),
) -> AgentSpec:
    """Prepare HOME for agent `kind` ("claude", "pi" or "codex") and return its spec.

    extra_path goes first on PATH (e.g. a dir holding the `bench` to use).
    """
    if bin_dir is None:
        bin_dir = installed_bin_dir()
        if bin_dir is None:
            raise AgentsUnavailable("agent CLIs not installed; call ensure_installed() first")
    return PREPARE[kind](home, port, cwd, bin_dir, extra_path)


# --------------------------------------------------------------------------- bench mcp

# Agents with an MCP client (pi has none, by design), and where their requests go on the
# scripted server (to tell their requests apart in its log).
MCP_KINDS = ("claude", "codex")
ROUTES = {"claude": "/v1/messages", "codex": "/v1/responses", "pi": "/v1/chat/completions"}


def use_bench_mcp(spec: AgentSpec) -> AgentSpec:
    """Give the agent `bench mcp` as its MCP server and take its shell tool away.

    The server entry is exactly what `bench mcp --print-config KIND` prints; `bench` is
    found on the agent's PATH (the prepared one, whose first entry holds it), and the
    server is started by the agent inside its session, so it inherits BENCH_DIR and
    BENCH_TOKEN from the session's environment.
    """
    from bench_mcp.tools import snippet

    _note, text = snippet(spec.kind)
    if spec.kind == "claude":
        path = spec.home / ".claude.json"
        cfg = json.loads(path.read_text(encoding="utf-8"))
        cfg["mcpServers"] = json.loads(text)["mcpServers"]  # user scope: no approval dialog
        _write_json(path, cfg)
        # No shell: Bash (and its output/kill companions) denied, which removes them from
        # the tools the model is offered; bench's MCP tools allowed without a prompt.
        _write_json(
            spec.home / ".claude" / "settings.json",
            {
                "permissions": {
                    "allow": ["mcp__bench", "Read", "Write", "Edit"],
                    "deny": ["Bash", "BashOutput", "KillShell"],
                }
            },
        )
    elif spec.kind == "codex":
        # No shell: the shell tool and unified exec (exec_command) features off. The
        # server table goes after them, at the end of the file.
        config = spec.env["CODEX_HOME"] + "/config.toml"
        with open(config, "a", encoding="utf-8") as f:
            f.write("\n[features]\nshell_tool = false\nunified_exec = false\n\n" + text)
    else:
        raise ValueError(f"{spec.kind} has no MCP client")
    return spec


def mcp_connected(kind: str, home: str | Path) -> bool:
    """True once the agent in this HOME has connected to its `bench` MCP server.

    Claude Code logs each MCP server's connection as JSON lines under
    ``$XDG_CACHE_HOME/claude-cli-nodejs/<cwd>/mcp-logs-bench/``; Codex logs the
    server's initialize answer (its server_info, name "bench") into
    ``$CODEX_HOME/logs_2.sqlite``.
    """
    home = Path(home)
    if kind == "claude":
        logs = (home / ".cache" / "claude-cli-nodejs").glob("*/mcp-logs-bench/*.jsonl")
        return any("Successfully connected" in p.read_text(errors="replace") for p in logs)
    if kind == "codex":
        import sqlite3

        db = home / ".codex" / "logs_2.sqlite"
        if not db.exists():
            return False
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
                row = c.execute(
                    "SELECT 1 FROM logs WHERE feedback_log_body LIKE ? LIMIT 1",
                    ('%server_info: Some(Implementation { name: "bench"%',),
                ).fetchone()
        except sqlite3.Error:
            return False  # not created yet, or busy: ask again
        return row is not None
    raise ValueError(f"no MCP connection check for {kind}")
