"""`bench mcp` over its real stdio, line by line: the real `bench mcp` process against a
real daemon, fed what a broken or hostile client sends. Every bad line is answered with
JSON-RPC's parse error (-32700) or invalid request (-32600) and the server goes on
serving; a body over the daemon's cap is refused as body-too-large, as the CLI does.
"""

import json
import os
import select
import subprocess
import time

import pytest

from tests.conftest import BENCH

pytest.importorskip("mcp", reason="the MCP SDK (the bench[mcp] extra) is not installed")

DEADLINE = 60.0


class Stdio:
    """`bench mcp` as a child process with pipes: raw lines in, JSON lines out."""

    def __init__(self, bench_dir: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
        env["BENCH_DIR"] = bench_dir
        self.proc = subprocess.Popen(
            [BENCH, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.buf = b""

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def call(self, rid: int, method: str, params: dict | None = None) -> dict:
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg).encode())
        return self.answer()

    def answer(self) -> dict:
        """The next JSON-RPC message the server writes, within the deadline."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + DEADLINE
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            assert left > 0, f"no answer within {DEADLINE} s; got {self.buf[:200]!r}"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                assert chunk, f"bench mcp closed stdout: {self.stderr()}"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def stderr(self) -> str:
        self.proc.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        rc = self.proc.wait(DEADLINE)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        return rc


def _serving(d) -> Stdio:
    """`bench mcp` on daemon d, past its initialize handshake."""
    s = Stdio(d.dir)
    init = s.call(
        1,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        },
    )
    assert init["id"] == 1 and "result" in init, init
    s.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    return s


def _end(s: Stdio) -> None:
    if s.proc.poll() is None:
        s.proc.kill()
        s.close()


@pytest.fixture
def mcp(shared):
    """A server on the module's daemon, for the tests that read nobody else's mail."""
    s = _serving(shared)
    yield s
    _end(s)


@pytest.fixture
def own_mcp(daemon):
    """A server on a daemon of its own (a wait on the operator's whole mailbox)."""
    s = _serving(daemon)
    yield s
    _end(s)


def parse_error(a: dict) -> str:
    assert a["jsonrpc"] == "2.0" and a["id"] is None, a
    assert a["error"]["code"] == -32700, a
    assert a["error"]["message"], a
    return a["error"]["message"]


def still_serving(s: Stdio, rid: int) -> None:
    a = s.call(rid, "tools/list")
    assert a["id"] == rid and "send_mail" in {t["name"] for t in a["result"]["tools"]}, a


def test_invalid_json_is_a_parse_error_and_the_server_goes_on(mcp):
    assert "JSON" in parse_error(
        (mcp.send(b'{"jsonrpc": "2.0", "id": 5, "method"'), mcp.answer())[1]
    )
    still_serving(mcp, 2)
    parse_error((mcp.send(b"not json at all"), mcp.answer())[1])
    still_serving(mcp, 3)
    assert mcp.close() == 0


def test_invalid_utf8_is_a_parse_error_and_the_server_goes_on(mcp):
    line = b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\xff\xfe"}}'
    msg = parse_error((mcp.send(line), mcp.answer())[1])
    assert "UTF-8" in msg and "0xff" in msg
    still_serving(mcp, 2)
    assert mcp.close() == 0


def test_deep_nesting_is_a_parse_error_and_the_server_goes_on(mcp):
    parse_error((mcp.send(b"[" * 100_000), mcp.answer())[1])
    parse_error((mcp.send(b"[" * 100_000 + b"]" * 100_000), mcp.answer())[1])
    still_serving(mcp, 2)
    assert mcp.close() == 0


def test_json_that_is_no_jsonrpc_message_is_an_invalid_request(mcp):
    mcp.send(b'{"id": 9, "hello": "world"}')
    a = mcp.answer()
    assert a["id"] == 9 and a["error"]["code"] == -32600, a
    mcp.send(b"[1, 2, 3]")
    a = mcp.answer()
    assert a["id"] is None and a["error"]["code"] == -32600, a
    still_serving(mcp, 2)
    assert mcp.close() == 0


def test_an_oversize_body_is_body_too_large_as_in_the_cli(mcp, shared, who):
    daemon = shared
    cap = daemon.call({"verb": "hello"})["caps"]["body_bytes"]
    big = "x" * (3 * 1024 * 1024)
    a = mcp.call(2, "tools/call", {"name": "send_mail", "arguments": {"to": who, "body": big}})
    result = a["result"]
    assert result["isError"] is True, a
    err = result["structuredContent"]["error"]
    assert err["code"] == "body-too-large", err
    assert f"{cap:,}" in err["message"] and "nothing was sent" in err["message"]
    just_over = "y" * (cap + 1)
    a = mcp.call(
        3, "tools/call", {"name": "send_mail", "arguments": {"to": who, "body": just_over}}
    )
    assert a["result"]["structuredContent"]["error"]["code"] == "body-too-large", a
    # The same server then sends, and the CLI agrees with it about the cap.
    a = mcp.call(4, "tools/call", {"name": "send_mail", "arguments": {"to": who, "body": "fits"}})
    assert a["result"].get("isError") in (None, False), a
    assert daemon.ok("mail", "list", "--handle", who)["total"] == 1
    r = daemon.bench("mail", "send", who, "--json", input=big)
    assert r.rc == 1 and r.json["error"]["code"] == "body-too-large"
    assert mcp.close() == 0


def tool(s: Stdio, rid: int, name: str, args: dict) -> dict:
    return s.call(rid, "tools/call", {"name": name, "arguments": args})


def test_wait_for_mail_over_stdio_returns_what_arrives_and_times_out(daemon, own_mcp):
    mcp = own_mcp
    # Nothing comes: the wait ends at its timeout with bench's code.
    a = tool(mcp, 2, "wait_for_mail", {"timeout_seconds": 1})
    assert a["result"]["isError"] is True, a
    assert a["result"]["structuredContent"]["error"]["code"] == "timeout"
    # Asked first, answered once the mail arrives: the message, read.
    mcp.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "wait_for_mail", "arguments": {"timeout_seconds": 60}},
            }
        ).encode()
    )
    daemon.wait_event("wait/opened", lambda e: e["handle"] == "operator" and e["on"] is None)
    sent = daemon.ok("mail", "send", "operator", "-m", "arrived while waiting")
    a = mcp.answer()
    assert a["id"] == 3 and a["result"].get("isError") is not True, a
    got = a["result"]["structuredContent"]
    assert got["mail_id"] == sent["mail_id"] and got["body"] == "arrived while waiting"
    assert got["retired"] is True
    # Its state, as mail_status shows it to its sender (the operator here).
    a = tool(mcp, 4, "mail_status", {"id": sent["mail_id"]})
    st = a["result"]["structuredContent"]
    assert st["state"] == "read" and {"delivered", "read"} <= {x["state"] for x in st["states"]}
    # Waiting on yourself is a cycle: refused at once.
    a = tool(mcp, 5, "wait_for_mail", {"sent_by": "operator", "timeout_seconds": 60})
    assert a["result"]["structuredContent"]["error"]["code"] == "would-deadlock", a
    assert mcp.close() == 0
