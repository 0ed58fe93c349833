"""The layers hold, as ARCHITECTURE.md states them.

- Between packages: `bench_wire` imports no other package of bench; `benchd` imports
  `bench_wire` only; `bench_cli`, `bench_mcp` and `bench_bridge` never import `benchd`
  (they talk to it over its socket).
- Inside benchd: each module imports only its own layer and those above it
  (core <- store <- runtime <- server), and the core does no I/O at all.
- No module reaches into another package's private names (`from x.y import _z`, or
  `y._z` through an imported module).
- No import circle anywhere in the product: tests/unit/test_cycles.py, on the same
  reading of the imports.

Read from the source with `ast` (nothing is imported), so a new module is checked the
moment it exists. Every import counts: at the top, inside a function, relative
(`from . import x`), or by name (`importlib.import_module("benchd")`). The benchd rule is
written in benchd/__init__.py.
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
    "logging",
    "ctypes",
    "mmap",
}


PACKAGES = ("bench_wire", "benchd", "bench_cli", "bench_mcp", "bench_bridge")
# What each package may import of bench's other packages. The clients talk to the
# daemon over its socket; `bench_cli` starts `bench mcp` and `bench bridge` by importing
# them lazily, and `bench mcp` shares the CLI's output helpers.
CLIENTS = {"bench_wire", "bench_cli", "bench_mcp", "bench_bridge"}
MAY_IMPORT = {
    "bench_wire": set(),
    "benchd": {"bench_wire"},
    "bench_cli": CLIENTS,
    "bench_mcp": CLIENTS,
    "bench_bridge": CLIENTS,
}


def modules():
    for path in sorted((ROOT / "benchd").rglob("*.py")):
        rel = path.relative_to(ROOT / "benchd").parts
        if len(rel) >= 2:  # benchd/<layer>/<module>.py, benchd/<layer>/<package>/...
            yield rel[0], path


def module_name(path: pathlib.Path) -> str:
    """`benchd/store/index.py` -> `benchd.store.index`; a package's `__init__.py` -> its name."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: pathlib.Path) -> str:
    """The package a module lives in (for `__init__.py`, the package itself)."""
    return ".".join(path.relative_to(ROOT).parent.parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _base(node: ast.ImportFrom, package: str | None) -> str | None:
    """The absolute module an ImportFrom names (relative ones resolved from `package`)."""
    if node.level == 0:
        return node.module
    if package is None:
        return None
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports(tree: ast.AST, package: str | None = None) -> list[str]:
    """Every module the code imports, wherever the import statement is; with `package`,
    relative imports are resolved against it. `from a import b` counts as both `a` and
    `a.b` (b may be a module), and a constant string given to `importlib.import_module`
    or `__import__` counts too."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            if base:
                out.append(base)
                out += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            arg = node.args[0]
            by_name = name in ("import_module", "__import__")
            if by_name and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append(arg.value)
    return out


def private_reaches(tree: ast.AST, package: str, known: dict[str, str]) -> list[str]:
    """`_private` names of a module in another package of bench, taken by import
    (`from m import _x`) or through an imported module (`import m` ... `m._x`).
    `known` maps each module of bench to its package."""
    out = []
    bound = {}  # local name -> the bench module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in known:
                    bound[a.asname or a.name] = full
                elif _private(a.name) and base in known and known[base] != package:
                    out.append(f"from {base} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known:  # `import a.b` binds `a`; `import a.b as m` binds a.b
                    local = a.asname or a.name.split(".")[0]
                    bound[local] = a.name if a.asname else a.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, v = [], node.value
            while isinstance(v, ast.Attribute):
                chain.insert(0, v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                target = ".".join([bound[v.id], *chain])
                if target in known and known[target] != package:
                    out.append(f"{target}.{node.attr} (line {node.lineno})")
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_every_benchd_module_is_in_a_layer():
    loose = [p.name for p in (ROOT / "benchd").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside the layers: {loose}"
    assert {layer for layer, _ in modules()} == set(ORDER)


@pytest.mark.parametrize("layer,path", list(modules()), ids=lambda v: str(v))
def test_imports_point_only_to_the_same_layer_or_above(layer, path):
    for mod in imports(ast.parse(path.read_text()), package_of(path)):
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


@pytest.mark.parametrize(
    "name,path", [pytest.param(n, p, id=n) for n, p in sorted(all_modules().items())]
)
def test_packages_import_only_what_they_may(name, path):
    """No client imports benchd (not even inside a function), benchd imports only the
    wire types, and bench_wire imports no other package of bench."""
    own = name.split(".")[0]
    for mod in imports(ast.parse(path.read_text()), package_of(path)):
        top = mod.split(".")[0]
        if top in MAY_IMPORT and top != own:
            assert top in MAY_IMPORT[own], f"{name} imports {mod}"


def test_no_module_reaches_into_another_packages_private_names():
    known = {name: package_of(path) for name, path in all_modules().items()}
    breaches = {
        name: found
        for name, path in all_modules().items()
        if (found := private_reaches(ast.parse(path.read_text()), package_of(path), known))
    }
    assert breaches == {}


def test_the_import_check_sees_every_kind_of_import():
    """The check itself: imports inside functions, relative imports and imports by name
    are all seen, and relative ones resolve against the module's package."""
    code = (
        "def up():\n"
        "    from benchd.store.statedir import check_state_dir\n"
        "    import benchd.runtime.system\n"
        "from . import output\n"
        "from ..store import index\n"
        "importlib.import_module('benchd.server.app')\n"
    )
    found = imports(ast.parse(code), "benchd.runtime")
    assert {
        "benchd.store.statedir",
        "benchd.runtime.system",
        "benchd.runtime.output",
        "benchd.store.index",
        "benchd.server.app",
    } <= set(found)


def test_the_private_check_catches_both_ways_in():
    known = {"benchd.store.index": "benchd.store", "benchd.store.search": "benchd.store"}
    code = (
        "from benchd.store.index import _read, Index\n"
        "from benchd.store import search\n"
        "import benchd.store.index as ix\n"
        "def f():\n"
        "    return search._rank(ix._read(), ix.public)\n"
    )
    assert sorted(private_reaches(ast.parse(code), "benchd.server", known)) == [
        "benchd.store.index._read (line 5)",
        "benchd.store.search._rank (line 5)",
        "from benchd.store.index import _read",
    ]
    assert private_reaches(ast.parse(code), "benchd.store", known) == []  # its own package


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
