"""The `bench` console script: hot agent commands without click, everything else with it."""

import sys


def main() -> int:
    from bench_cli import hot

    parsed = hot.parse(sys.argv[1:])
    if parsed is not None:
        return hot.run(*parsed)
    from bench_cli.main import run

    return run()


if __name__ == "__main__":
    sys.exit(main())
