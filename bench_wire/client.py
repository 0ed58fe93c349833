"""The CLI's fast path to the daemon: a blocking AF_UNIX client on C modules only.

Why this exists: `bench mail send` runs inside agents many times a session, and its cost
is the interpreter start plus imports. `socket` pulls in `enum` and `selectors`, `json`
pulls in `re`, and msgspec pulls in `typing`: together several times the interpreter's
own start. This module uses `_socket` and `_json` directly, so a fast-path command costs
about one interpreter start and one round trip.

The frames it writes are the msgspec request types of `bench_wire.messages`, field for
field: `tests/unit/test_client.py` decodes every frame this module builds with the msgspec
request decoder and compares it with the Struct it stands for, and compares the decoded
responses with the msgspec response types, so the two cannot drift apart.
"""

import _json
import _socket
import os
import sys

from bench_wire.errors import WireError
from bench_wire.paths import dir_problem, resolve_dir, socket_path

# `typing` would cost the fast path an import: it is imported for the type checker only
# (mypy reads TYPE_CHECKING as true), and annotations that name it are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: "dict[str, Any]" = {}

    @staticmethod
    def parse_constant(name: str) -> "Any":
        raise ValueError(f"JSON constant {name} is not allowed")


_scan = _json.make_scanner(_ScanContext())  # type: ignore[arg-type]  # duck-typed context
_quote = _json.encode_basestring


def loads(text: str) -> "Any":
    """Decode one JSON document (a response line)."""
    try:
        obj, end = _scan(text, 0)
    except StopIteration as stop:  # the C scanner's way of saying "no value here"
        raise ValueError(f"no JSON value at position {stop.value}") from None
    if text[end:].strip():
        raise ValueError("trailing data after JSON value")
    return obj


def dumps(obj: object) -> str:
    """Encode plain data (dict, list, str, int, float, bool, None) as compact JSON."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _quote(obj)
    if isinstance(obj, int):
        return str(int(obj))
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise ValueError("JSON has no NaN or infinity")
        return repr(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(_quote(k) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot encode {type(obj).__name__}")


def request(verb: str, fields: "dict[str, Any]") -> "dict[str, Any]":
    """A request object: verb, the caller's token (BENCH_TOKEN), then the given fields
    (None means "use the default" and is left out)."""
    req: dict[str, Any] = {"verb": verb}
    token = os.environ.get("BENCH_TOKEN")
    if token:
        req["token"] = token
    for k, v in fields.items():
        if v is not None:
            req[k] = v
    return req


def peer_uid(sock: _socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED:
    struct ucred is pid, uid, gid as native ints)."""
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[4:8], sys.byteorder)


class Client:
    """One blocking connection; `call` sends a request and returns the decoded answer."""

    def __init__(self, bench_dir: str | None = None, timeout: float | None = 30.0):
        self.bench_dir = resolve_dir(bench_dir)
        path = socket_path(self.bench_dir)
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            sock.close()
            raise dir_problem(self.bench_dir) or WireError(
                "no-daemon",
                f"no daemon is running for {self.bench_dir}: start it with `bench up`",
            ) from err
        except OSError as err:
            sock.close()
            raise dir_problem(self.bench_dir) or WireError(
                "no-daemon", f"cannot reach the daemon at {path}: {err}"
            ) from err
        # Whoever binds the path answers: before sending anything (a request may carry a
        # session's token, a body), check that the peer runs as us (one getsockopt).
        try:
            uid = peer_uid(sock)
        except OSError as err:
            sock.close()
            raise WireError("no-daemon", f"cannot reach the daemon at {path}: {err}") from err
        if uid != os.getuid():
            sock.close()
            raise WireError(
                "daemon-not-ours",
                f"the socket {path} is served by a process of uid {uid}, not yours "
                f"({os.getuid()}): refusing to talk to it; nothing was sent",
            )
        self.sock = sock
        self._buf = b""
        self._next_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, line: bytes) -> None:
        try:
            self.sock.sendall(line)
        except OSError as err:
            # The daemon may have answered before closing (e.g. frame-too-long): say that.
            try:
                self.sock.settimeout(1.0)
                answer = self.recv()
            except (WireError, OSError):
                answer = None
            if answer is not None:
                check(answer)
            raise WireError("protocol", f"the connection to the daemon broke: {err}") from None

    def send(self, req: "dict[str, Any]") -> int:
        self._next_id += 1
        req = dict(req)
        req.setdefault("id", self._next_id)
        self.send_raw(dumps(req).encode("utf-8", "surrogatepass") + b"\n")
        rid: int = req["id"]
        return rid

    def recv_line(self) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1 :]
                return line
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError as err:
                raise WireError("protocol", f"the connection to the daemon broke: {err}") from err
            if not chunk:
                raise WireError("protocol", "the daemon closed the connection")
            self._buf += chunk

    def recv(self) -> "dict[str, Any]":
        line = self.recv_line()
        try:
            obj = loads(line.decode("utf-8"))
        except ValueError as err:
            raise WireError("protocol", f"the daemon's answer is not JSON: {err}") from err
        if not isinstance(obj, dict):
            raise WireError("protocol", "the daemon's answer is not an object")
        return obj

    def call(self, req: "dict[str, Any]") -> "dict[str, Any]":
        """Send one request; return the answer, or raise WireError for an error answer."""
        self.send(req)
        return check(self.recv())


def check(answer: "dict[str, Any]") -> "dict[str, Any]":
    if answer.get("ok") is False:
        err = answer.get("error") or {}
        raise WireError(
            str(err.get("code", "protocol")), str(err.get("message", "")), err.get("retry_after")
        )
    return answer
