"""The import budget: what the CLI loads, checked in fresh interpreters.

`bench mail send` runs inside agents many times a session; its cost is the interpreter
start plus its imports. The fast path (bench_cli.entry) must not load click, msgspec, json,
re, socket or typing; no part of the CLI may load the daemon's trio.
"""

import ast
import json
import os
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The MCP server, the bridge (nats-py, asyncio) and the dashboard (textual, rich) load
# only for their own commands: never on the send path, nor in the rest of the CLI.
EXTRAS = {
    "bench_mcp",
    "mcp",
    "mcp_types",
    "anyio",
    "pydantic",
    "nats",
    "bench_bridge",
    "textual",
    "rich",
}

HOT_FORBIDDEN = {
    "click",
    "msgspec",
    "json",
    "re",
    "socket",
    "typing",
    "trio",
    "benchd",
    "selectors",
    "enum",
    "asyncio",
    "subprocess",
    "yaml",
} | EXTRAS
CLI_FORBIDDEN = {
    "trio",
    "benchd",
    "ptyprocess",
    "pyte",
} | EXTRAS

# Prints, as JSON: the top-level modules present before bench was imported, and after.
# The one part of an extra the CLI may load is bench_bridge.options (the bridge's option
# declarations, standard library only), for `bench bridge` and `bench nodes init` flags.
PROBE = r"""
import sys
LIGHT = {"bench_bridge", "bench_bridge.options"}
before = sorted({n.split('.')[0] for n in sys.modules})
BODY
after = sorted({n.split('.')[0] for n in sys.modules if n not in LIGHT})
import json as _j
sys.stdout.write("\n@@PROBE@@" + _j.dumps({"before": before, "after": after, "result": repr(result)}))
"""

HOT_PARSE = """
sys.argv = ['bench', 'mail', 'send', 'x', '-m', 'y']
from bench_cli import entry
result = entry.parse(sys.argv[1:])
"""


def probe(body: str, *flags: str, env: dict | None = None) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "PYTHON"))}
    e.update(env or {})
    proc = subprocess.run(
        [sys.executable, *flags, "-c", PROBE.replace("BODY", body)],
        capture_output=True,
        text=True,
        env=e,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.rsplit("@@PROBE@@", 1)[1])
    out["new"] = set(out["after"]) - set(out["before"])
    out["after"] = set(out["after"])
    out["stderr"] = proc.stderr
    return out


def test_hot_parse_imports_nothing_heavy():
    r = probe(HOT_PARSE)
    assert "mail" in r["result"] and "'to': 'x'" in r["result"]
    assert {"bench_cli", "bench_wire"} <= r["new"]
    assert not (r["new"] & HOT_FORBIDDEN), sorted(r["new"] & HOT_FORBIDDEN)


def test_hot_parse_imports_nothing_heavy_without_site():
    # Without site (no .pth hooks that load re/enum first), everything in sys.modules is
    # what the interpreter itself needs plus what the fast path imported.
    r = probe(HOT_PARSE, "-S", env={"PYTHONPATH": ROOT})
    assert "mail" in r["result"]
    assert not (r["after"] & HOT_FORBIDDEN), sorted(r["after"] & HOT_FORBIDDEN)


def test_hot_path_importtime_lists_no_heavy_module():
    e = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "PYTHON"))}
    e["PYTHONPATH"] = ROOT
    code = (
        "import sys; sys.argv=['bench','mail','send','x','-m','y']; "
        "from bench_cli import entry; entry.parse(sys.argv[1:])"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=e,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "bench_cli" in names and "bench_wire" in names
    assert not (names & HOT_FORBIDDEN), sorted(names & HOT_FORBIDDEN)


def test_hot_run_without_a_daemon_stays_lean():
    d = tempfile.mkdtemp(prefix="bimp", dir="/tmp")
    try:
        body = f"""
sys.argv = ['bench', 'mail', 'send', 'x', '-m', 'y', '--dir', {d!r}]
from bench_cli import entry
result = entry.main(leave=False)
"""
        r = probe(body, "-S", env={"PYTHONPATH": ROOT})
        assert r["result"] == "3"  # no daemon
        assert "bench up" in r["stderr"] and d in r["stderr"]
        assert not (r["after"] & HOT_FORBIDDEN), sorted(r["after"] & HOT_FORBIDDEN)
    finally:
        os.rmdir(d)


def test_cli_main_never_imports_the_daemon_stack():
    r = probe("import bench_cli.cli\nresult = bench_cli.cli.cli.name")
    assert "click" in r["new"]
    assert not (r["new"] & CLI_FORBIDDEN), sorted(r["new"] & CLI_FORBIDDEN)


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["events"],
        ["ps"],
        ["mail", "send", "--help"],
        ["down"],
        ["nodes"],
        ["bridge", "--help"],
        ["dash", "--help"],
        ["mail", "search", "x"],
    ],
)
def test_click_commands_never_import_the_daemon_stack(argv):
    d = tempfile.mkdtemp(prefix="bimp", dir="/tmp")
    try:
        body = f"""
sys.argv = ['bench', *{argv!r}, '--dir', {d!r}]
from bench_cli import entry
try:
    result = entry.main()
except SystemExit as e:
    result = e.code
"""
        r = probe(body)
        assert r["result"] in ("0", "3"), r
        assert not (r["after"] & CLI_FORBIDDEN), sorted(r["after"] & CLI_FORBIDDEN)
    finally:
        os.rmdir(d)


def test_bench_wire_package_import_is_empty():
    r = probe(
        "import bench_wire, bench_wire.errors, bench_wire.client\nresult = 1",
        "-S",
        env={"PYTHONPATH": ROOT},
    )
    assert not (r["after"] & HOT_FORBIDDEN), sorted(r["after"] & HOT_FORBIDDEN)


# ---------------------------------------------------------------- what a send costs, by structure

# Every module of bench a cold `bench mail send` loads, and the C modules it adds to what
# the interpreter loads anyway. Each costs a few hundred microseconds on a loaded machine
# (a directory walk, a read, its top-level code): a new one here is a decision, not a drift.
SEND_MODULES = {
    "bench_cli",
    "bench_cli.entry",
    "bench_cli.output",
    "bench_wire",
    "bench_wire.client",
    "bench_wire.clientproto",
    "bench_wire.errors",
    # Every verb named once (the request Structs take their tags from it): 35 string
    # constants, about 0.1 ms, so that no verb is spelled outside bench_wire.
    "bench_wire.verbs",
}
SEND_C_MODULES = {"_json", "_socket", "marshal", "time"}


def imported(cmd: list[str], env: dict) -> set[str]:
    """The modules a process imports, from its own -X importtime report."""
    proc = subprocess.run(
        cmd,
        env=dict(env, PYTHONPROFILEIMPORTTIME="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        ln.rsplit("|", 1)[-1].strip()
        for ln in proc.stderr.splitlines()
        if ln.startswith("import time:") and "|" in ln
    } - {"imported package"}


def test_a_cold_send_loads_exactly_the_allowed_modules(daemon):
    from tests.support.daemon import BENCH

    env = daemon.env()
    daemon.ok("mail", "send", "x", "-m", "first")  # a known mailbox: no new-mailbox hint
    floor = imported([sys.executable, "-c", "pass"], env)
    sent = imported([BENCH, "mail", "send", "x", "-m", "y"], env)
    new = sent - floor
    ours = {n for n in new if n.startswith("bench")}
    assert ours == SEND_MODULES, (sorted(ours - SEND_MODULES), sorted(SEND_MODULES - ours))
    assert new - SEND_MODULES <= SEND_C_MODULES, sorted(new - SEND_MODULES)


def _import_time_calls(tree: "ast.Module") -> list[str]:
    """What a module calls while it is imported: top-level code, class bodies, decorators
    and defaults; not function bodies."""
    calls: list[str] = []

    def visit(node: "ast.AST") -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for part in [*getattr(child, "decorator_list", []), *child.args.defaults]:
                    visit(part)
                continue
            if isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING":
                for part in child.orelse:  # the type checker's branch never runs
                    visit(part)
                continue
            if isinstance(child, ast.Call):
                calls.append(ast.unparse(child.func))
            visit(child)

    visit(tree)
    return calls


def test_the_send_modules_do_no_work_at_import():
    # No regex compiled, no msgspec Struct or enum built, no table computed: at import a
    # send module defines functions and plain classes, and calls only its own classes
    # and a builtin constructor or two (what its top level needs to exist).
    cheap = {"set", "frozenset", "dict", "tuple", "sys.exit", "main"}
    cheap |= {"_json.make_scanner", "_json.make_encoder"}
    for name in sorted(SEND_MODULES):
        path = os.path.join(ROOT, *name.split(".")) + ".py"
        if not os.path.exists(path):
            path = os.path.join(ROOT, *name.split("."), "__init__.py")
        with open(path) as f:
            tree = ast.parse(f.read())
        own = {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
        for call in _import_time_calls(tree):
            assert call in cheap | own, f"{name} calls {call}() at import"
        for cls in (c for c in tree.body if isinstance(c, ast.ClassDef)):
            # `Stream[F]`: a class of its own, subscripted for the type checker only.
            bases = {ast.unparse(b.value if isinstance(b, ast.Subscript) else b) for b in cls.bases}
            assert bases <= {"Exception", "WireError", "object"} | own, (name, cls.name, bases)


def test_a_cold_hook_loads_what_a_send_loads(daemon):
    """`bench hook` runs at each of an agent's hook events: the send's budget, no more."""
    from tests.support.daemon import BENCH

    out = os.path.join(daemon.scratch, "tok")
    daemon.ok(
        "spawn",
        "--name",
        "h",
        "--no-sandbox",
        "--",
        "sh",
        "-c",
        f'echo "$BENCH_TOKEN" > {out}.tmp && mv {out}.tmp {out}; exec sleep 600',
    )
    daemon.wait_until(lambda: os.path.exists(out), what="the session's token")
    with open(out) as f:
        env = dict(daemon.env(), BENCH_TOKEN=f.read().strip())
    floor = imported([sys.executable, "-c", "pass"], env)
    hooked = imported([BENCH, "hook", "stop"], env)
    new = hooked - floor
    ours = {n for n in new if n.startswith("bench")}
    assert ours == SEND_MODULES, (sorted(ours - SEND_MODULES), sorted(SEND_MODULES - ours))
    assert new - SEND_MODULES <= SEND_C_MODULES, sorted(new - SEND_MODULES)
