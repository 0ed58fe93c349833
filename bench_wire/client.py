"""The blocking shell of the client protocol: the CLI's fast path, on C modules only.

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

from bench_wire.clientproto import Answer, ClientProtocol, refusal
from bench_wire.errors import Disconnected, WireError
from bench_wire.paths import dir_problem, resolve_dir, socket_path

# `typing` would cost the fast path an import: it is imported for the type checker only
# (mypy reads TYPE_CHECKING as true), and annotations that name it are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bench_wire.clientproto import Id


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


# ---------------------------------------------------------------- what both shells share


class JSONCodec:
    """The client protocol's codec for plain data: dict requests out, dict answers in,
    on the C modules above (the fast path's)."""

    def encode(self, req: "dict[str, Any]", rid: int) -> "tuple[Id, bytes]":
        if "id" not in req:
            req = {**req, "id": rid}
        return req["id"], dumps(req).encode("utf-8", "surrogatepass") + b"\n"

    def decode(self, line: bytes) -> "dict[str, Any]":
        try:
            obj = loads(line.decode("utf-8"))
        except ValueError as err:
            raise ValueError(f"the daemon's answer is not JSON: {err}") from None
        if not isinstance(obj, dict):
            raise ValueError("the daemon's answer is not an object")
        return obj

    def head(self, frame: "dict[str, Any]") -> "tuple[Id, str | None]":
        kind = frame.get("type")
        return frame.get("id"), kind if isinstance(kind, str) else None

    def error(self, frame: "dict[str, Any]") -> "tuple[str, str, float | None] | None":
        if frame.get("ok") is not False:
            return None
        err = frame.get("error") or {}
        return str(err.get("code", "protocol")), str(err.get("message", "")), err.get("retry_after")


JSON = JSONCodec()


def check(answer: "dict[str, Any]") -> "dict[str, Any]":
    """The answer, or its refusal raised (for answers read with `Client.recv`)."""
    parts = JSON.error(answer)
    if parts is not None:
        raise refusal(*parts)
    return answer


def unreachable(bench_dir: str, path: str, err: OSError) -> WireError:
    """Why a connect to the daemon's socket failed, as both shells report it: what is
    wrong with BENCH_DIR if anything, else no daemon."""
    if isinstance(err, (FileNotFoundError, ConnectionRefusedError)):
        why = f"no daemon is running for {bench_dir}: start it with `bench up`"
    else:
        why = f"cannot reach the daemon at {path}: {err}"
    return dir_problem(bench_dir) or Disconnected("no-daemon", why)


def check_peer(sock: _socket.socket, path: str) -> None:
    """Whoever binds the path answers: before anything is sent (a request may carry a
    session's token, a body), check that the peer runs as us (one getsockopt)."""
    try:
        uid = peer_uid(sock)
    except OSError as err:
        raise Disconnected("no-daemon", f"cannot reach the daemon at {path}: {err}") from err
    if uid != os.getuid():
        raise WireError(
            "daemon-not-ours",
            f"the socket {path} is served by a process of uid {uid}, not yours "
            f"({os.getuid()}): refusing to talk to it; nothing was sent",
        )


def broke(err: OSError) -> Disconnected:
    """A read or write failed: `protocol`, the CLI's exit 4 for a broken connection."""
    return Disconnected("protocol", f"the connection to the daemon broke: {err}")


# ---------------------------------------------------------------- the blocking shell


class Client:
    """One blocking connection; `call` sends a request and returns the decoded answer.

    The framing, the ids and the error mapping are the client protocol's
    (`bench_wire.clientproto`); this shell only moves its bytes.
    """

    def __init__(self, bench_dir: str | None = None, timeout: float | None = 30.0):
        self.bench_dir = resolve_dir(bench_dir)
        path = socket_path(self.bench_dir)
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as err:
            sock.close()
            raise unreachable(self.bench_dir, path, err) from err
        try:
            check_peer(sock, path)
        except WireError:
            sock.close()
            raise
        self.sock = sock
        self._proto = ClientProtocol(JSON)

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
            raise broke(err) from None

    def send(self, req: "dict[str, Any]") -> "Id":
        """Send a request without waiting; its answers come from `recv`, in order."""
        rid, line = self._proto.send(req, track=False)
        self.send_raw(line)
        return rid

    def has_answer(self) -> bool:
        """Whether an answer is already read: select() on `sock` cannot show it."""
        return self._proto.has_event()

    def _next(self) -> Answer:
        while (answer := self._proto.next_answer()) is None:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError as err:
                raise broke(err) from err
            self._proto.receive_data(chunk)
        return answer

    def recv(self) -> "dict[str, Any]":
        """The next frame, whichever request it answers; an error frame is returned
        as it is (`check` raises it)."""
        frame: dict[str, Any] = self._next().frame
        return frame

    def call(self, req: "dict[str, Any]") -> "dict[str, Any]":
        """Send one request; return the answer, or raise WireError for an error answer."""
        rid, line = self._proto.send(req)
        self.send_raw(line)
        while True:
            answer = self._next()
            if answer.id == rid or (answer.id is None and answer.error is not None):
                result: dict[str, Any] = answer.result()
                return result
            # Frames for requests sent with `send` and never read: not this one's answer.
