"""`bench mcp`: the mailroom as Model Context Protocol tools, over stdio.

- `bench_mcp.tools`: the tools as a model sees them (names, descriptions, JSON schemas),
  argument checks, the pure steps between a tool call and the daemon's verbs, and the
  snippets `bench mcp --print-config` prints.
- `bench_mcp.server`: the MCP server (the `mcp` SDK's low-level server), its stdio
  transport and its daemon calls; needs the optional extra `bench[mcp]`.

Nothing here is imported by `bench mail send` (tests/unit/test_imports.py holds it).
"""
