"""No import circle inside `benchd`, not even one the type checker alone would see.

The graph is read from the source with `ast` (nothing is imported) and counts every
import: at the top, under `if TYPE_CHECKING:`, inside a function, relative or by name
(the same reading as test_layers.py). A circle is a strongly connected set of modules;
the test names each one with its edges so the way out is plain: move the shared type
down, or pass a callback, or name a small Protocol in a lower module (benchd/runtime/
views.py holds the runtime's).
"""

import ast

from tests.unit.test_layers import ROOT, imports, module_name, package_of

# Circles that exist today and may only shrink: a name leaves this set when its circle
# is broken, and nothing is ever added. Empty means none.
KNOWN: set[frozenset[str]] = set()


def graph() -> dict[str, set[str]]:
    """Each benchd module -> the benchd modules it imports (packages' `__init__` are
    import-free, so they are left out)."""
    paths = {module_name(p): p for p in sorted((ROOT / "benchd").rglob("*.py"))}
    out: dict[str, set[str]] = {}
    for name, path in paths.items():
        found = imports(ast.parse(path.read_text()), package_of(path))
        out[name] = {m for m in found if m in paths and m != name and m.count(".") >= 2}
    return out


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
    short = {m: m.removeprefix("benchd.") for m in circle}
    lines = [
        f"  {short[a]} -> {short[b]}" for a in sorted(circle) for b in sorted(edges[a] & circle)
    ]
    return "circle of " + ", ".join(sorted(short.values())) + ":\n" + "\n".join(lines)


def test_no_import_circle_inside_benchd():
    edges = graph()
    found = cycles(edges)
    new = [c for c in found if not any(c <= k for k in KNOWN)]
    assert not new, "import circles inside benchd:\n" + "\n".join(describe(c, edges) for c in new)


def test_the_known_circles_only_shrink():
    """An entry of KNOWN that no longer holds a circle is removed (the list only shrinks)."""
    found = cycles(graph())
    stale = [sorted(k) for k in KNOWN if not any(c <= k for c in found)]
    assert not stale, f"circles broken, remove them from KNOWN: {stale}"


def test_the_circle_check_finds_a_circle_through_type_checking():
    """The check itself: an import under `if TYPE_CHECKING:` or inside a function closes
    a circle as surely as one at the top."""
    code_a = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from benchd.x.b import B\n"
    code_b = "def f():\n    from benchd.x.a import A\n"
    edges = {
        "benchd.x.a": {m for m in imports(ast.parse(code_a)) if m.startswith("benchd.x.")},
        "benchd.x.b": {m for m in imports(ast.parse(code_b)) if m.startswith("benchd.x.")},
        "benchd.x.c": {"benchd.x.a"},
    }
    edges = {k: {m for m in v if m in edges} for k, v in edges.items()}
    assert cycles(edges) == [frozenset({"benchd.x.a", "benchd.x.b"})]
