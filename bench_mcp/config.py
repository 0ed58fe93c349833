"""The MCP configuration snippets that `bench mcp --print-config AGENT` prints.

Each agent starts `bench mcp` itself, inside its own session, so the server runs with
the session's environment: BENCH_DIR says which daemon, BENCH_TOKEN who is calling.
Claude Code hands its whole environment to the servers it starts; Codex hands over
only the variables named in `env_vars`, so its snippet names them. Pure text, no I/O.
"""

import json

# What a session's server needs from the session's environment.
SESSION_ENV = ("BENCH_DIR", "BENCH_TOKEN", "BENCH_SESSION", "BENCH_HANDLE")

AGENTS = ("claude", "codex", "pi")


def snippet(agent: str, command: str = "bench") -> tuple[str, str]:
    """(where it goes, the text to paste) for `agent`'s MCP configuration.

    The text is the file's content exactly (valid JSON or TOML); the note says which
    file and what to know, and goes to stderr, so `> .mcp.json` works.
    """
    if agent == "claude":
        cfg = {"mcpServers": {"bench": {"type": "stdio", "command": command, "args": ["mcp"]}}}
        return (
            "Claude Code: .mcp.json in the project directory (or mcpServers in "
            f"~/.claude.json, or: claude mcp add bench -- {command} mcp). The tools show up "
            "as mcp__bench__send_mail, mcp__bench__read_mail, ...",
            json.dumps(cfg, indent=2) + "\n",
        )
    if agent == "codex":
        env_vars = ", ".join(json.dumps(v) for v in SESSION_ENV)
        return (
            "Codex: ~/.codex/config.toml (or $CODEX_HOME/config.toml). Codex passes a "
            "server only the variables named in env_vars, so bench's are listed.",
            "[mcp_servers.bench]\n"
            f"command = {json.dumps(command)}\n"
            'args = ["mcp"]\n'
            f"env_vars = [{env_vars}]\n",
        )
    if agent == "pi":
        cfg = {"mcpServers": {"bench": {"command": command, "args": ["mcp"]}}}
        return (
            "pi has no MCP client of its own (by design: it works through command-line "
            "tools), so in pi use the bench CLI from its bash tool (skills/mail/SKILL.md). "
            "An MCP extension for pi that reads the common mcpServers format takes the "
            "entry below; it must start the server inside the session.",
            json.dumps(cfg, indent=2) + "\n",
        )
    raise ValueError(f"no MCP configuration for {agent!r}; known: {', '.join(AGENTS)}")
