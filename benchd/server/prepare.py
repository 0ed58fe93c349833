"""`python -m benchd.server.prepare DIR`: what `bench up` runs before it writes there.

It makes BENCH_DIR (0700) and checks it exactly as the daemon will at its start
(`benchd/store/statedir.py`), so that `bench up` refuses an unsafe directory in one
line before it creates `benchd.out` in it, without importing the daemon: the clients
import nothing of benchd (`tests/unit/test_layers.py` holds that). Exit 0 when the
directory may be used; exit 2 with the reason in one line on stderr when not.
"""

import sys

from benchd.server.lockdir import directory_problem


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m benchd.server.prepare BENCH_DIR", file=sys.stderr)
        return 2
    problem = directory_problem(args[0])
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
