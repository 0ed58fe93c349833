"""`bench mcp`: the mailroom as Model Context Protocol tools, over stdio: the tools as a
model sees them and their pure steps (`tools`), and the server (`server`, the optional
extra `bench[mcp]`). Nothing here is imported by `bench mail send`."""
