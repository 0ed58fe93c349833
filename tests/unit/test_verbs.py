"""Every verb is spelled in bench_wire only: the clients build requests from its Structs
(or, on the fast path, from `bench_wire.verbs`), never from a string of their own.

The scan reads the string constants of every module of bench_cli, bench_mcp and
bench_bridge. A verb with a slash may not appear at all, unless it is also an event's
kind (`mail/read`: a dashboard matches events by kind). One-word verbs (`hello`, `stop`,
`events`) are also the CLI's words, so for them the scan looks at how requests are
made: no `"verb"` key, and no `request(...)` with a literal verb.
"""

import ast
import os

from bench_wire import messages as m
from bench_wire import verbs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENTS = ("bench_cli", "bench_mcp", "bench_bridge")

NAMED = {v for k, v in vars(verbs).items() if k.isupper() and isinstance(v, str)}
# Spelled the same as something else: an event kind, or a plain word of the CLI.
SHARED = {v for v in NAMED if v in m.EVENT_KINDS or "/" not in v}


def modules() -> list[str]:
    found = []
    for pkg in CLIENTS:
        for base, _, files in os.walk(os.path.join(ROOT, pkg)):
            found += [os.path.join(base, f) for f in files if f.endswith(".py")]
    return sorted(found)


def breaches(path: str) -> list[str]:
    with open(path) as f:
        tree = ast.parse(f.read())
    rel = os.path.relpath(path, ROOT)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in NAMED - SHARED:
                out.append(f"{rel}:{node.lineno}: the verb {node.value!r}")
            elif node.value == "verb":
                out.append(f"{rel}:{node.lineno}: a request built by hand ('verb')")
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("request")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.append(f"{rel}:{node.lineno}: request() with a literal verb")
    return out


def test_the_verbs_module_names_every_verb_of_the_types():
    assert set(m.VERBS) == NAMED
    assert verbs.STREAMS <= NAMED


def test_no_client_spells_a_verb():
    found = [b for path in modules() for b in breaches(path)]
    assert not found, "verbs spelled outside bench_wire:\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for(tmp_path):
    # The scan itself, on a module that does each thing it forbids.
    bad = tmp_path / "bad.py"
    bad.write_text(
        'a = {"verb": "hello"}\n'
        'b = "mail/send"\n'
        'c = request("hello", {})\n'
        'd = "mail/read"  # an event kind too: allowed\n'
    )
    found = breaches(str(bad))
    assert len(found) == 3, found
