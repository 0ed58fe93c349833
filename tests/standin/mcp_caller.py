"""Runs inside a session, as an agent would: starts `bench mcp` as its own child over
stdio with the `mcp` client library, makes the tool calls given, records the results.

    python mcp_caller.py CALLS.json OUT.json [--no-token]

CALLS.json is a list of [tool, arguments]. With --no-token the server's environment
lacks BENCH_TOKEN (as with an agent that forwards only some variables), so the daemon
can tell who it is only from its process ancestry. OUT.json gets, per call, the
structured content and whether it was an error; written atomically at the end. Then it
waits for its stdin to close (the test ends the session).
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(calls: list, no_token: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k.startswith("BENCH_")}
    if no_token:
        env.pop("BENCH_TOKEN", None)
    bench = os.path.join(os.path.dirname(sys.executable), "bench")
    out = []
    async with Client(StdioServerParameters(command=bench, args=["mcp"], env=env)) as c:
        for tool, args in calls:
            r = await c.call_tool(tool, args)
            out.append({"tool": tool, "error": r.is_error, "data": r.structured_content})
    return out


if __name__ == "__main__":
    calls_path, out_path = sys.argv[1], sys.argv[2]
    with open(calls_path) as f:
        calls = json.load(f)
    results = anyio.run(main, calls, "--no-token" in sys.argv)
    with open(out_path + ".tmp", "w") as f:
        json.dump(results, f)
    os.rename(out_path + ".tmp", out_path)
    sys.stdin.read()
