"""The real `bench` CLI run inside the test process, for the commands that are one request
and its answer: the same parser, commands and output code as the `bench` process, the
same environment, stdin, stdout and stderr as that process would have (a pipe each), and
its exit code; only the interpreter start is skipped. A `bench` process costs a test
about 0.1 s of CPU (and seconds of wall time on a loaded machine); the suite makes
thousands.

What is not one request and its answer runs as a process still: a command not listed
below (`up`, `down`, `attach`, `mcp`, `bridge`, waits, `tail -f`, help), one given stdin,
one run as another user, or one called off the main thread. The modules that are about
the `bench` process itself (tests/conformance/test_cli*.py) set `BENCH_CLI = "process"`,
and `BENCH_TEST_CLI=process` in the environment runs every command as a process, to
check that nothing here differs from it.
"""

import io
import os
import sys
import threading
import traceback

# (command words) -> options that would make it more than one request and its answer.
COMMANDS: dict[tuple[str, ...], frozenset[str]] = {
    ("mail", "send"): frozenset(),
    ("mail", "list"): frozenset(),
    ("mail", "read"): frozenset(),
    ("mail", "reply"): frozenset(),
    ("mail", "thread"): frozenset(),
    ("mail", "status"): frozenset(),
    ("mail", "sent"): frozenset(),
    ("mail", "search"): frozenset(),
    ("ps",): frozenset(),
    ("status",): frozenset(),
    ("nodes",): frozenset(),
    ("spawn",): frozenset({"--help"}),
    ("kill",): frozenset(),
    ("type",): frozenset(),
    ("tail",): frozenset({"-f", "--follow"}),
}

ALLOWED = os.environ.get("BENCH_TEST_CLI", "") != "process"


def fits(args: tuple[str, ...] | list[str]) -> bool:
    """Whether `bench ARGS` may run in the test process."""
    if not ALLOWED or threading.current_thread() is not threading.main_thread():
        return False
    for cmd, refused in COMMANDS.items():
        if tuple(args[: len(cmd)]) == cmd:
            rest = args[len(cmd) :]
            # After `--` comes a spawned command's own argv, not bench's options.
            mine = rest[: rest.index("--")] if "--" in rest else rest
            return not any(a in refused or a in ("-h", "--help") for a in mine)
    return False


def run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """`bench ARGS` in this process with environment `env` and stdin at its end, as
    Benchd.bench runs it with stdin=DEVNULL: (exit code, stdout, stderr)."""
    from bench_cli import entry

    saved_env = dict(os.environ)
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr)
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace")
    stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["bench", *args]
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        code = entry.main(leave=False)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # noqa: BLE001 - what the process would do: print it, exit 1
        traceback.print_exc()
        code = 1
    finally:
        for f in (stdout, stderr):
            f.flush()
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        os.environ.clear()
        os.environ.update(saved_env)
    return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")
