"""ARCHITECTURE.md's module map is complete: every product module is named in the row of
its package (or layer) in the map's code blocks, so a new module cannot go unmentioned.

A row is a line of a fenced block that starts with a package path ending in `/`
(`benchd/runtime/`, `bench_bridge/`), with the indented lines under it; a module
belongs to the row of its nearest enclosing directory that has one
(`benchd/server/handlers/mail.py` to `benchd/server/`).
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("benchd", "bench_wire", "bench_cli", "bench_mcp", "bench_bridge")
ROW = re.compile(r"^((?:benchd|bench_wire|bench_cli|bench_mcp|bench_bridge)(?:/\w+)*/)\s")


def _rows() -> dict[str, str]:
    """Each map row's directory and its text (its first line and the indented ones)."""
    rows: dict[str, str] = {}
    text = (ROOT / "ARCHITECTURE.md").read_text()
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
        current = None
        for line in block.splitlines():
            found = ROW.match(line + " ")
            if found:
                current = found.group(1).rstrip("/")
                rows[current] = rows.get(current, "") + " " + line[found.end() - 1 :]
            elif current is not None and line[:1].isspace():
                rows[current] += " " + line
            else:
                current = None
    return rows


def _modules() -> list[pathlib.Path]:
    found: list[pathlib.Path] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__init__.py" and "__pycache__" not in path.parts:
                found.append(path.relative_to(ROOT))
    return found


def _row_for(rows: dict[str, str], directory: pathlib.PurePath) -> str | None:
    for parent in (directory, *directory.parents):
        if str(parent) in rows:
            return str(parent)
    return None


def test_every_product_module_is_named_in_its_row_of_the_map():
    rows = _rows()
    assert {"bench_wire", "benchd/core", "benchd/runtime", "bench_bridge"} <= set(rows)
    missing = []
    for module in _modules():
        row = _row_for(rows, module.parent)
        word = re.compile(rf"(?<![\w]){re.escape(module.stem)}(?![\w])")
        if row is None or not word.search(rows[row]):
            missing.append(f"{module} (row {row or 'none'})")
    assert not missing, "modules ARCHITECTURE.md's map does not name:\n" + "\n".join(missing)


def test_the_map_names_no_module_that_is_gone():
    """A row's `name.py` mentions point at files that exist."""
    rows = _rows()
    stale = []
    for directory, text in rows.items():
        for name in re.findall(r"(?<![\w/])(\w+)\.py\b", text):
            if not list((ROOT / directory).rglob(f"{name}.py")):
                stale.append(f"{directory}/{name}.py")
    assert not stale, stale
