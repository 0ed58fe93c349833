"""The dashboard's line to the daemon: asyncio over the Unix socket, JSON lines.

One short connection per request; one long connection per stream (the event log, a
session's screen). A session's token is never sent: the dashboard is the operator.
"""

import asyncio
import json
import os
from collections.abc import AsyncIterator

from bench_wire.errors import WireError
from bench_wire.paths import resolve_dir, socket_path

# Between attempts to reach a daemon that is not running: doubling from the first to the
# last, so a dashboard left open on a stopped daemon wakes only every few seconds, while
# one that saw `bench down; bench up` is back within a second or two.
RETRY_FIRST_S = 0.25
RETRY_LAST_S = 4.0


def retry_delay(failures: int) -> float:
    """Seconds to wait after `failures` attempts in a row found no daemon (0: the first)."""
    return min(RETRY_LAST_S, RETRY_FIRST_S * 2 ** min(failures, 16))


class DaemonGone(Exception):
    """No daemon answers (not started, stopped, or the connection broke)."""


class Source:
    def __init__(self, bench_dir: str | None = None):
        self.dir = resolve_dir(bench_dir)
        self.sock = socket_path(self.dir)
        self._n = 0

    async def _open(self):
        try:
            return await asyncio.open_unix_connection(self.sock, limit=8 * 1024 * 1024)
        except (FileNotFoundError, ConnectionRefusedError, OSError) as err:
            raise DaemonGone(str(err)) from None

    def _frame(self, verb: str, fields: dict) -> bytes:
        self._n += 1
        req = {"verb": verb, "id": self._n}
        req.update({k: v for k, v in fields.items() if v is not None})
        return (json.dumps(req) + "\n").encode()

    async def call(self, verb: str, **fields) -> dict:
        """One request, its answer; WireError for a refusal, DaemonGone if none answers."""
        reader, writer = await self._open()
        try:
            writer.write(self._frame(verb, fields))
            await writer.drain()
            line = await reader.readline()
        except OSError as err:
            raise DaemonGone(str(err)) from None
        finally:
            writer.close()
        if not line:
            raise DaemonGone("the daemon closed the connection")
        a = json.loads(line)
        if not a.get("ok"):
            error = a.get("error") or {}
            raise WireError(error.get("code", "protocol"), error.get("message"))
        return a

    async def stream(self, verb: str, **fields) -> AsyncIterator[dict]:
        """Every frame of a stream until its end frame (DaemonGone if it breaks)."""
        reader, writer = await self._open()
        try:
            writer.write(self._frame(verb, fields))
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    raise DaemonGone("the daemon closed the stream")
                a = json.loads(line)
                if not a.get("ok"):
                    err = a.get("error") or {}
                    raise WireError(err.get("code", "protocol"), err.get("message"))
                if a["type"] == "end":
                    return
                yield a
        except (ConnectionError, OSError) as err:
            raise DaemonGone(str(err)) from None
        finally:
            writer.close()

    def attach_argv(self, handle: str) -> list[str]:
        """`bench attach H` for this BENCH_DIR, by the installed console script."""
        import sys

        bench = os.path.join(os.path.dirname(sys.executable), "bench")
        if not os.path.exists(bench):
            return [sys.executable, "-m", "bench_cli.entry", "attach", "--dir", self.dir, handle]
        return [bench, "attach", "--dir", self.dir, handle]
