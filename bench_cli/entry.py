"""The `bench` console script: fast-path agent commands without click, everything else with it."""

import os
import sys


def main(leave: bool = True) -> int:
    from bench_cli import fastpath

    parsed = fastpath.parse(sys.argv[1:])
    if parsed is not None:
        code = fastpath.run(*parsed)
        if leave:
            _leave(code)
        return code
    from bench_cli.cli import run

    return run()


def _leave(code: int) -> None:
    """End the process now, its output flushed: the interpreter's own teardown (every
    module and object freed one by one) costs a fast-path command about as much as its
    imports, and a send has nothing left to clean up (its socket is closed, no file is
    open for writing, no atexit hook is registered on this path)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: what a normal exit would also fail to write
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
