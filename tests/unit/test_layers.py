"""The layers of benchd hold: each module imports only its own layer and those above it
(core <- store <- runtime <- server), and the core does no I/O at all.

Read from the source with `ast` (nothing is imported), so a new module is checked the
moment it exists. The rule is written in benchd/__init__.py.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ORDER = {"core": 0, "store": 1, "runtime": 2, "server": 3}
# What a pure module may not touch: the event loop, processes, sockets, files, terminals.
IO_MODULES = {
    "trio",
    "anyio",
    "asyncio",
    "os",
    "io",
    "socket",
    "select",
    "selectors",
    "signal",
    "subprocess",
    "threading",
    "multiprocessing",
    "shutil",
    "pathlib",
    "tempfile",
    "fcntl",
    "termios",
    "pty",
    "ptyprocess",
    "pyte",
    "sqlite3",
    "structlog",
    "logging",
    "ctypes",
    "mmap",
}


def modules():
    for path in sorted((ROOT / "benchd").rglob("*.py")):
        rel = path.relative_to(ROOT / "benchd").parts
        if len(rel) >= 2:  # benchd/<layer>/<module>.py, benchd/<layer>/<package>/...
            yield rel[0], path


def imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            if node.module == "benchd":
                out += [f"benchd.{a.name}" for a in node.names]
    return out


def test_every_benchd_module_is_in_a_layer():
    loose = [p.name for p in (ROOT / "benchd").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside the layers: {loose}"
    assert {layer for layer, _ in modules()} == set(ORDER)


@pytest.mark.parametrize("layer,path", list(modules()), ids=lambda v: str(v))
def test_imports_point_only_to_the_same_layer_or_above(layer, path):
    for mod in imports(ast.parse(path.read_text())):
        parts = mod.split(".")
        if parts[0] == "benchd" and len(parts) > 1 and parts[1] in ORDER:
            assert ORDER[parts[1]] <= ORDER[layer], f"{path.name} ({layer}) imports {mod}"


@pytest.mark.parametrize(
    "path", [p for layer, p in modules() if layer == "core"], ids=lambda p: p.name
)
def test_the_core_does_no_io(path):
    tree = ast.parse(path.read_text())
    used = {m.split(".")[0] for m in imports(tree)}
    assert not used & IO_MODULES, f"{path.name} imports {sorted(used & IO_MODULES)}"
    calls = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not calls & {"open", "print", "input"}, f"{path.name} calls {calls & {'open'}}"


def test_the_layer_check_catches_a_pure_module_that_does_io(tmp_path):
    """The check itself: a module that imports trio or opens a file is caught."""
    bad = "import trio\nfrom os import path\n\n\ndef f():\n    return open('x')\n"
    tree = ast.parse(bad)
    assert {"trio", "os"} <= {m.split(".")[0] for m in imports(tree)}
    assert "open" in {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
