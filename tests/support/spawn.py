"""One spawn helper: a session through the real CLI (`bench spawn --json`), and the
stand-in agent (tests/standin/standin.py) as the usual thing to run in it."""

import json
import os
import stat
import sys

from tests.support.daemon import ROOT

STANDIN = os.path.join(ROOT, "tests", "standin", "standin.py")
PROMPT = "standin>"


def standin_argv(*args: str) -> list[str]:
    """The stand-in agent's command line (args go to the stand-in: --record FILE, ...)."""
    return [sys.executable, STANDIN, *args]


def spawn(d, *argv: str, name: str | None = None, ready: str | None = None) -> dict:
    """`bench spawn [--name N] [--ready RE] -- ARGV` on daemon d; asserts success and
    returns the answer."""
    opts = []
    if name:
        opts += ["--name", name]
    if ready:
        opts += ["--ready", ready]
    return d.ok("spawn", *opts, "--", *argv)


def spawn_standin(d, name: str, *args: str, timeout: float = 20.0) -> dict:
    """A stand-in agent named `name`, returned once its prompt shows on its screen."""
    s = spawn(d, *standin_argv(*args), name=name, ready=PROMPT)
    d.wait_until(
        lambda: PROMPT in d.bench("tail", name, "--screen").out, timeout, f"{name}'s prompt"
    )
    return s


def records(path) -> list[dict]:
    """The lines a stand-in recorded (`--record FILE`: one JSON object each); [] before
    its first."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def program_named(daemon, name: str, *command: str) -> str:
    """An executable called `name` in the daemon's scratch dir that runs `command` (an
    adapter recognises its agent by the program's name: a stand-in goes as `claude`)."""
    bindir = os.path.join(daemon.scratch, "bin")
    os.makedirs(bindir, exist_ok=True)
    path = os.path.join(bindir, name)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\nexec {" ".join(command)} "$@"\n')
        os.chmod(path, stat.S_IRWXU)
    return path
