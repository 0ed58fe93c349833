"""What a user probably meant: a command from git, docker or tmux habits, a typo, a
handle with the wrong case or a letter off. The fast path runs it on its error paths."""

# typing is outside the fast path's import budget: the type checker's alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# Words from git, docker and tmux habits, by the group typed in: what bench calls that.
ALIASES: dict[tuple[str, ...], dict[str, str]] = {
    (): {
        # mail
        "send": "mail send",
        "mail-send": "mail send",
        "list": "mail list",
        "inbox": "mail list",
        "read": "mail read",
        "show": "mail read",
        "cat": "mail read",
        "reply": "mail reply",
        "thread": "mail thread",
        "search": "mail search",
        "grep": "mail search",
        "find": "mail search",
        # sessions
        "ls": "ps",
        "list-sessions": "ps",
        "sessions": "ps",
        "top": "dash",
        "logs": "tail",
        "log": "events",
        "capture-pane": "tail --screen",
        "run": "spawn",
        "new": "spawn",
        "new-session": "spawn",
        "exec": "type",
        "send-keys": "type",
        "a": "attach",
        "at": "attach",
        "attach-session": "attach",
        "rm": "kill",
        "kill-session": "kill",
        # the daemon
        "start": "up",
        "stop": "down",
        "start-server": "up",
        "kill-server": "down",
        "info": "status",
        "version": "--version",
    },
    ("mail",): {
        "ls": "mail list",
        "inbox": "mail list",
        "show": "mail read",
        "cat": "mail read",
        "open": "mail read",
        "grep": "mail search",
        "find": "mail search",
        "log": "mail thread",
        "write": "mail send",
        "post": "mail send",
        "answer": "mail reply",
        "respond": "mail reply",
    },
}


# Words for what bench does not do at all, by group: the sentence that says so.
_KEPT = (
    "bench keeps every message: nothing is deleted. bench mail read ID retires one "
    "(it leaves the unread list, its file moves to read/); bench mail list --state all "
    "shows both"
)
NOT_HERE: dict[tuple[str, ...], dict[str, str]] = {
    ("mail",): {w: _KEPT for w in ("rm", "delete", "del", "remove", "archive", "purge")},
}


def distance(a: str, b: str) -> int:
    """Edits from a to b: insert, delete, replace, or swap two neighbours (mial -> mail
    is one edit)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            d = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            row.append(d)
        prev2, prev = prev, row
    return prev[-1]


def nearest(word: str, choices: "Iterable[str]") -> str | None:
    """The one other choice `word` most likely meant: the same but for case, else the
    closest within a third of its length (at least one edit); else None."""
    others = sorted(set(choices) - {word})
    folded = [c for c in others if c.lower() == word.lower()]
    if len(folded) == 1:
        return folded[0]
    limit = max(1, len(word) // 3)
    best: list[str] = []
    best_d = limit + 1
    for c in others:
        d = distance(word.lower(), c.lower())
        if d < best_d:
            best, best_d = [c], d
        elif d == best_d:
            best.append(c)
    return best[0] if len(best) == 1 else None


def command(group: tuple[str, ...], word: str, commands: "Iterable[str]") -> str | None:
    """`bench ...` for an unknown command `word` typed in `group` (() for the top level,
    ("mail",) for `bench mail`), or None."""
    alias = ALIASES.get(group, {}).get(word) or ALIASES.get(group, {}).get(word.lower())
    if alias is not None:
        return "bench " + alias
    close = nearest(word, commands)
    if close is not None:
        return "bench " + " ".join((*group, close))
    return None


def handle(word: str, known: "Iterable[str]") -> str:
    """` (did you mean bob?)` for a handle that looks wrong, or "" when nothing is close."""
    close = nearest(word, known)
    return f" (did you mean {close}?)" if close else ""


def address(word: str, known: "Iterable[str]") -> str:
    """` (did you mean ...?)` for a recipient refused as written: `Carol@node2` lower-cased
    when that is an address, else the closest known one."""
    if "@" not in word:
        return handle(word, known)
    from bench_wire.addresses import is_address  # loads re: on this error path only

    if word.lower() != word and is_address(word.lower()):
        return f" (did you mean {word.lower()}?)"
    close = nearest(word, [k for k in known if "@" in k])
    return f" (did you mean {close}?)" if close else ""
