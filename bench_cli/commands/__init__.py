"""The click commands of `bench`, one module per area, each imported only when one of its commands is asked for (see bench_cli.cli)."""
