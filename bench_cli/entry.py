"""The `bench` console script: fast-path agent commands without click, everything else with it."""

import sys


def main() -> int:
    from bench_cli import fastpath

    parsed = fastpath.parse(sys.argv[1:])
    if parsed is not None:
        return fastpath.run(*parsed)
    from bench_cli.cli import run

    return run()


if __name__ == "__main__":
    sys.exit(main())
