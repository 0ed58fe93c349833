"""The click commands of `bench`, one module per area, each imported only when one of its
commands is asked for (the table is `COMMANDS` in bench_cli.cli)."""
