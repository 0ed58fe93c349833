"""No import circle anywhere in the product (bench_wire, benchd, bench_cli, bench_mcp,
bench_bridge), not even one the type checker alone would see.

The graph is read from the source with `ast` (nothing is imported) and counts every
import: at the top, under `if TYPE_CHECKING:`, inside a function, relative or by name
(the same reading as test_layers.py). A circle is a strongly connected set of modules;
the test names each one with its edges so the way out is plain: move the shared type
down (bench_wire/_responses.py holds the Structs requests carry too), pass what is
used rather than the object that has it (bench_bridge's loops take a publish, a tell,
a retry), or name a small Protocol in a lower module.
"""

import ast

from tests.unit.test_layers import all_modules, imports


def graph(sources: dict[str, str], inits: set[str] = frozenset()) -> dict[str, set[str]]:
    """Module -> the modules of `sources` (name -> code) it imports; `inits` names the
    packages' `__init__` modules (their relative imports start at themselves). An
    imported name that is not a module counts as the module it is in (`from a.b import
    f` is `a.b`)."""
    edges: dict[str, set[str]] = {name: set() for name in sources}
    for name, code in sources.items():
        package = name if name in inits else name.rpartition(".")[0]
        for mod in imports(ast.parse(code), package):
            while mod and mod not in sources:
                mod = mod.rpartition(".")[0]
            if mod and mod != name:
                edges[name].add(mod)
    return edges


def product_graph() -> dict[str, set[str]]:
    found = all_modules()
    inits = {name for name, path in found.items() if path.name == "__init__.py"}
    return graph({name: path.read_text() for name, path in found.items()}, inits)


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        members.add(m)
                        if m == node:
                            break
                    if len(members) > 1:
                        out.append(frozenset(members))
    return out


def describe(circle: frozenset[str], edges: dict[str, set[str]]) -> str:
    lines = [f"  {a} -> {b}" for a in sorted(circle) for b in sorted(edges[a] & circle)]
    return "circle of " + ", ".join(sorted(circle)) + ":\n" + "\n".join(lines)


def test_no_import_circle_anywhere_in_the_product():
    edges = product_graph()
    found = cycles(edges)
    assert not found, "import circles:\n" + "\n".join(describe(c, edges) for c in found)


def test_every_package_is_in_the_graph():
    names = set(product_graph())
    for package in ("bench_wire", "benchd", "bench_cli", "bench_mcp", "bench_bridge"):
        assert any(n.startswith(package + ".") for n in names), package


def test_the_circle_check_finds_a_circle_through_type_checking_and_functions():
    """The check itself: an import under `if TYPE_CHECKING:`, inside a function or
    relative closes a circle as surely as one at the top; importing into a circle, or
    importing oneself, does not make one."""
    sources = {
        "pkg.a": "from pkg import b\n",
        "pkg.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\n",
        "pkg.c": "def f():\n    from . import a\n",
        "pkg.d": "from pkg.a import x\n",
        "pkg.e": "import pkg.e\n",
    }
    assert cycles(graph(sources)) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
    del sources["pkg.c"]
    assert cycles(graph(sources)) == []
