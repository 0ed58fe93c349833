"""Agent presets: what a real agent TUI needs from the reactor, by name.

`bench spawn --agent NAME -- CMD` takes the preset's ready pattern (unless --ready is
given) and its paste settle. Built in: claude, codex, pi (observed on Claude Code
2.1, Codex 0.171, pi 0.73 against a local model; see docs/agents.md and
tests/real_agents/agents.py). Add your own in $BENCH_DIR/presets.json:

    {"aider": {"ready": "^> $", "paste_settle": 0.3}}

A file preset of the same name replaces the built-in one.
"""

import json
import os
from dataclasses import dataclass

from bench_wire.errors import WireError


@dataclass(frozen=True)
class Preset:
    ready: str  # regex searched in the visible screen (lines right-trimmed)
    paste_settle: float | None = None  # seconds between the pasted line and Enter


BUILTIN = {
    # The footer hint; Claude hides it while the input box holds text, so it also
    # means "the input box is empty". Its Ink TUI needs a longer settle before Enter.
    "claude": Preset(ready=r"\? for shortcuts", paste_settle=0.5),
    # Codex shows "? for shortcuts" while still loading; the full footer only once
    # loading is over. Enter within ~120 ms of text becomes a newline: settle 0.25 s.
    "codex": Preset(ready=r"for agents · \? for shortcuts", paste_settle=0.25),
    # pi's context gauge on its status line, e.g. "0.0%/128k".
    "pi": Preset(ready=r"\d+(?:\.\d+)?%/\d+k", paste_settle=0.2),
}


def load(bench_dir: str) -> dict[str, Preset]:
    presets = dict(BUILTIN)
    path = os.path.join(bench_dir, "presets.json")
    if not os.path.exists(path):
        return presets
    try:
        with open(path) as f:
            raw = json.load(f)
        for name, p in raw.items():
            presets[name] = Preset(
                ready=str(p["ready"]),
                paste_settle=None if p.get("paste_settle") is None else float(p["paste_settle"]),
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise WireError("bad-request", f"{path} is not a valid preset file: {err}") from None
    return presets


def find(bench_dir: str, name: str) -> Preset:
    presets = load(bench_dir)
    if name not in presets:
        raise WireError(
            "bad-request", f"no agent preset {name!r}; known: {', '.join(sorted(presets))}"
        )
    return presets[name]
