"""One spawn helper: a session through the real CLI (`bench spawn --json`), and the
stand-in agent (tests/standin/standin.py) as the usual thing to run in it."""

import os
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
