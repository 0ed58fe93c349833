"""The line a wake types into a session: what it says, and how a plain shell is told.

An agent reads the line as a prompt (`You have mail from bob: <path>`). A shell at its
prompt would run it as a command (`bash: You: command not found` on every wake), so a
session whose program is an interactive shell gets the same words in a form the shell
ignores: a comment (`# You have mail ...`), or for zsh, whose interactive mode does not
take comments unless `interactive_comments` is set, the no-op `:` with the words quoted.
Pure: the session's argv decides, nothing is asked of the process.
"""

from bench_wire.untrusted import strip

# Shells whose interactive prompt takes `#` as the start of a comment.
COMMENT_SHELLS = frozenset(("bash", "sh", "dash", "ash", "ksh", "mksh", "fish", "busybox"))
SHELLS = COMMENT_SHELLS | {"zsh"}


def wake_line(sender: str, path: str) -> str:
    return f"You have mail from {strip(sender)}: {strip(path)}"


def digest_line(n: int) -> str:
    s = "" if n == 1 else "s"
    return f"You have {n} unread message{s}: run bench mail list to see them"


def shell_of(argv: list[str]) -> str | None:
    """The shell's name when `argv` starts an interactive shell (`bash`, `/bin/zsh -l`,
    `bash -i`), else None: an agent, or a shell running a command (`bash -c ...`) or a
    script (`sh run.sh`), whose input is not a prompt."""
    if not argv:
        return None
    name = argv[0].rsplit("/", 1)[-1].lstrip("-")  # -bash: a login shell's argv[0]
    if name not in SHELLS:
        return None
    for arg in argv[1:]:
        if arg in ("-i", "--interactive"):
            return name
        if arg == "--command" or (arg.startswith("-") and not arg.startswith("--") and "c" in arg):
            return None  # -c, -lc: a command string
        if not arg.startswith("-"):
            return None  # a script
    return name


def for_shell(line: str, shell: str | None) -> str:
    """`line` as `shell` will ignore it (unchanged for an agent: shell None)."""
    if shell is None:
        return line
    if shell in COMMENT_SHELLS:
        return "# " + line
    return ": '" + line.replace("'", "'\\''") + "'"
