"""One clock: benchd reads the system's clocks in one module only (benchd/core/names.py).

Monotonic time is trio's (`trio.current_time()`, the clock trio.sleep waits on, which a
test replaces with `trio.testing.MockClock`); wall time comes from the injected
`WallClock`, whose real one lives in benchd/core/names.py. Any other read of the system
clock (`time.time()`, `time.monotonic()`, `datetime.now()` and their kind) would be a
second clock that a test cannot drive and a reading that cannot be compared with trio's.

Read from the source with `ast`, like tests/unit/test_layers.py: a call by attribute
(`time.monotonic()`), through an alias (`import time as t`), or a name imported from the
module (`from time import monotonic`) all count.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
THE_CLOCK = ROOT / "benchd" / "core" / "names.py"

# module -> the functions that read a clock (converting a given time, e.g.
# time.gmtime(secs) or time.strftime, reads nothing and is allowed). The kernel's boot
# clock (time.clock_gettime(CLOCK_BOOTTIME)) pins a peer's process in
# benchd.runtime.placement: a process identity compared with /proc, not a time bench keeps.
READS = {
    "time": {
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
    },
    "datetime": {"now", "utcnow", "today"},
}


def clock_reads(path: pathlib.Path) -> list[str]:
    """`line: call` for each read of a system clock in the file."""
    tree = ast.parse(path.read_text(), str(path))
    modules: dict[str, str] = {}  # local name -> "time" / "datetime" (module or class)
    direct: dict[str, str] = {}  # local name -> "time.monotonic" (from-imported)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in READS:
                    modules[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in READS:
            for a in node.names:
                if node.module == "datetime" and a.name in ("datetime", "date"):
                    modules[a.asname or a.name] = "datetime"
                elif a.name in READS[node.module]:
                    direct[a.asname or a.name] = f"{node.module}.{a.name}"
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        # time.monotonic, datetime.now, datetime.datetime.now, date.today
        if isinstance(base, ast.Attribute) and base.attr in ("datetime", "date"):
            base_module = "datetime"
        elif isinstance(base, ast.Name) and base.id in modules:
            base_module = modules[base.id]
        else:
            continue
        if node.attr in READS[base_module]:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            found.append(f"{node.lineno}: {direct[node.id]}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def test_benchd_reads_the_system_clock_only_in_its_clock_module():
    offenders = {
        str(path.relative_to(ROOT)): reads
        for path in sorted((ROOT / "benchd").rglob("*.py"))
        if path != THE_CLOCK and (reads := clock_reads(path))
    }
    assert not offenders, (
        "benchd reads a system clock outside benchd/core/names.py: use trio.current_time() "
        f"for intervals and the injected WallClock for times kept or shown: {offenders}"
    )


def test_the_clock_module_is_where_the_wall_clock_is_read():
    assert clock_reads(THE_CLOCK), "the scan no longer sees the one real read: fix the scan"


def test_the_scan_sees_every_way_of_reading_a_clock(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import time\n"
        "import time as t\n"
        "import datetime\n"
        "from time import monotonic as mono\n"
        "from datetime import datetime as dt\n"
        "a = time.monotonic()\n"
        "b = t.time_ns()\n"
        "c = mono()\n"
        "d = datetime.datetime.now()\n"
        "e = dt.utcnow()\n"
        "f = time.strftime('%Y', time.gmtime(0))\n"  # converting a given time: allowed
        "g = time.perf_counter\n"  # a reference passed on counts too
    )
    reads = clock_reads(src)
    assert [r.split(": ", 1)[0] for r in reads] == ["4", "6", "7", "8", "9", "10", "12"]
