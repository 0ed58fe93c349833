"""bench_mcp.server.parse_line: what each line of `bench mcp`'s stdin is answered with."""

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (the bench[mcp] extra) is not installed")

from bench_mcp.server import INVALID_REQUEST, PARSE_ERROR, parse_line  # noqa: E402


@pytest.mark.parametrize(
    "line",
    [
        b"{",
        b"nope",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
        b"\xff\xfe",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\xc3"}}',
        b"[" * 100_000,
        b"{" * 50_000,
    ],
)
def test_a_line_that_is_not_json_is_a_parse_error(line):
    message, error = parse_line(line)
    assert message is None and error is not None
    assert error.error.code == PARSE_ERROR and error.id is None
    assert error.error.message.startswith("parse error: ")


@pytest.mark.parametrize(
    ("line", "rid"),
    [(b'{"id": 3, "x": 1}', 3), (b'{"id": "a", "method": 7}', "a"), (b"[]", None), (b"1", None)],
)
def test_json_that_is_no_message_is_an_invalid_request(line, rid):
    message, error = parse_line(line)
    assert message is None and error is not None
    assert error.error.code == INVALID_REQUEST and error.id == rid


def test_a_message_is_passed_on():
    message, error = parse_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    assert error is None and message is not None and message.id == 1
