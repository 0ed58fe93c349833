"""The blocking shell of the client protocol (ARCHITECTURE.md, "One typed client"), and
where the daemon is (`resolve_dir`, `socket_path`), for every client and the daemon.

It is the CLI's fast path, on C modules only: `bench mail send` runs inside agents many
times a session, and `socket`, `json` and msgspec would cost it several interpreter
starts of imports, so `_socket` and `_json` are used directly.
"""

import _json
import _socket
import os
import stat  # loaded by os already
import sys

from bench_wire import verbs
from bench_wire.clientproto import Answer, ClientProtocol
from bench_wire.errors import Disconnected, WireError

TYPE_CHECKING = False  # the type checker's alone (mypy reads it as true): no `typing` import
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar, overload

    from bench_wire.clientproto import Codec, Id
    from bench_wire.messages import Request, Response

    R = TypeVar("R", bound=Response)
    F = TypeVar("F")
else:
    F = None

    def overload(f):  # the type checker's alone: the last definition is the one that runs
        return f

    class Generic:
        """The type checker's alone: `Stream[F]` at run time is `Stream`."""

        def __class_getitem__(cls, item):
            return cls


# Linux's sockaddr_un.sun_path is 108 bytes including the terminating NUL.
SUN_PATH_MAX = 108
SOCKET_NAME = "benchd.sock"


def resolve_dir(flag: str | None = None) -> str:
    """--dir, else $BENCH_DIR, else $XDG_STATE_HOME/bench (~/.local/state/bench); always
    absolute. An empty --dir is a mistake (an unset variable, say), not the default."""
    if flag == "":
        raise WireError(
            "usage",
            "--dir is empty: give a directory, or leave --dir out to use $BENCH_DIR "
            "(else ~/.local/state/bench)",
        )
    state = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    d = flag or os.environ.get("BENCH_DIR") or os.path.join(state, "bench")
    return os.path.abspath(os.path.expanduser(d))


# Why a directory could not be made, in words (the errno name otherwise).
_CANNOT = {
    "EACCES": "you may not write there",
    "EPERM": "you may not write there",
    "EROFS": "it is on a read-only file system",
    "ENOSPC": "the disk is full",
    "EDQUOT": "your disk quota is used up",
    # /proc and /sys answer ENOENT to a mkdir: they make their own entries only.
    "ENOENT": "that file system does not allow new directories",
}


def dir_problem(bench_dir: str, err: OSError | None = None) -> WireError | None:
    """`bad-dir` if BENCH_DIR or a directory above it is a file, or it is missing and
    cannot be made (`err`, from the attempt); else None."""
    path = bench_dir
    while True:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            continue
        except OSError:
            return None  # unreadable above: the daemon's own checks say what they find
        break
    if not stat.S_ISDIR(st.st_mode):
        if path == bench_dir:
            why = "give --dir a directory (bench up makes a missing one)"
        else:
            why = f"BENCH_DIR {bench_dir} cannot be made under it"
        return WireError("bad-dir", f"{path} is a file, not a directory: {why}")
    if path == bench_dir or err is None:
        return None
    import errno  # only on this error path

    name = errno.errorcode.get(err.errno or 0, "")
    why = _CANNOT.get(name) or f"{name or 'the system'} refused it"
    return WireError(
        "bad-dir",
        f"BENCH_DIR {bench_dir} does not exist and cannot be made in {path}: {why}",
    )


def socket_path(bench_dir: str) -> str:
    """The daemon's socket path in BENCH_DIR, or an error when AF_UNIX cannot hold it."""
    path = os.path.join(bench_dir, SOCKET_NAME)
    n = len(os.fsencode(path))
    if n >= SUN_PATH_MAX:
        raise WireError(
            "socket-path-too-long",
            f"the socket path {path} is {n} bytes; AF_UNIX allows at most "
            f"{SUN_PATH_MAX - 1} on Linux: choose a shorter BENCH_DIR",
        )
    return path


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


def _refuse(obj: object) -> object:
    raise TypeError(f"cannot encode {type(obj).__name__}")


# json.dumps's own C encoder, without the `json` module: compact, non-ASCII kept as it is,
# NaN and infinity refused (ValueError), anything but plain data refused (TypeError).
_encode = _json.make_encoder(None, _refuse, _quote, None, ":", ",", False, False, False)


def dumps(obj: object) -> str:
    """Encode plain data (dict, list, str, int, float, bool, None) as compact JSON."""
    return "".join(_encode(obj, 0))


def request(verb: str, fields: "dict[str, Any]") -> "dict[str, Any]":
    """A request object: verb, the caller's BENCH_TOKEN, then the fields not None."""
    req: dict[str, Any] = {"verb": verb}
    token = os.environ.get("BENCH_TOKEN")
    if token:
        req["token"] = token
    for k, v in fields.items():
        if v is not None:
            req[k] = v
    return req


# ---------------------------------------------------------------- what both shells share


class JSONCodec:
    """The client protocol's codec for plain data (the fast path's)."""

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

    def streams(self, req: "dict[str, Any]") -> bool:
        return req.get("verb") in verbs.STREAMS

    def expects(self, req: "dict[str, Any]") -> None:
        return None  # plain data: any answer is taken as it comes


JSON = JSONCodec()


def unreachable(bench_dir: str, path: str, err: OSError) -> WireError:
    """Why a connect to the daemon's socket failed, as both shells report it."""
    if isinstance(err, (FileNotFoundError, ConnectionRefusedError)):
        why = f"no daemon is running for {bench_dir}: start it with `bench up`"
    else:
        why = f"cannot reach the daemon at {path}: {err}"
    return dir_problem(bench_dir) or Disconnected("no-daemon", why)


def check_peer(sock: _socket.socket, path: str) -> None:
    """Whoever binds the path answers: before anything is sent (a request may carry a
    session's token, a body), check that the peer runs as us."""
    try:  # SO_PEERCRED: struct ucred is pid, uid, gid as native ints
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError as err:
        raise Disconnected("no-daemon", f"cannot reach the daemon at {path}: {err}") from err
    uid = int.from_bytes(raw[4:8], sys.byteorder)
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
    """One blocking connection: `call` returns a request's answer, `stream` yields a
    stream's frames up to its end. Plain dicts with the default codec (`JSON`); with
    `messages.StructCodec`, Structs of each request's own answer type."""

    def __init__(
        self,
        bench_dir: str | None = None,
        timeout: float | None = 30.0,
        codec: "Codec" = JSON,
    ):
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
        self._proto = ClientProtocol(codec)

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
                answer = self._next()
            except (WireError, OSError):
                answer = None
            if answer is not None:
                answer.result()
            raise broke(err) from None

    def send(self, req: "Any") -> "Id":
        """Send a request untracked (attach's keystrokes): its refusals come from `recv`."""
        rid, line = self._proto.send(req, track=False)
        self.send_raw(line)
        return rid

    def _next(self) -> Answer:
        while (answer := self._proto.next_answer()) is None:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError as err:
                raise broke(err) from err
            self._proto.receive_data(chunk)
        return answer

    def _answer(self, rid: "Id") -> Answer:
        """The next frame for request `rid` (the connection's own error included)."""
        while True:
            answer = self._next()
            if answer.belongs(rid):
                return answer

    def recv(self) -> "Any":
        """The next frame, whichever request it answers (an error frame as it is)."""
        return self._next().frame

    @overload
    def call(self, req: "Request[R]") -> "R": ...
    @overload
    def call(self, req: "dict[str, Any]") -> "dict[str, Any]": ...  # noqa: F811
    def call(self, req: "Any") -> "Any":  # noqa: F811 (overloads: the type checker's)
        """Send one request; return the answer, or raise WireError for an error answer."""
        rid, line = self._proto.send(req, stream=False)
        self.send_raw(line)
        return self._answer(rid).result()

    @overload
    def stream(self, req: "Request[R]") -> "Stream[R]": ...
    @overload
    def stream(self, req: "dict[str, Any]") -> "Stream[dict[str, Any]]": ...  # noqa: F811
    def stream(self, req: "Any") -> "Stream[Any]":  # noqa: F811
        """Send a stream's request and return its frames, up to its end frame (kept as
        `Stream.end`); a refusal is raised as WireError."""
        rid, line = self._proto.send(req, stream=True)
        self.send_raw(line)
        return Stream(self, rid)


class Stream(Generic[F]):
    """The frames of one stream on a blocking connection, up to its end (`end`).

    `pending()`: whether a frame is already read, which select() on the socket cannot
    show (`bench attach`). A caller that stops before the end closes the connection: the
    daemon would go on streaming into it."""

    def __init__(self, conn: Client, rid: "Id"):
        self._conn = conn
        self.id = rid
        self.end: Any = None
        self.ended = False

    def __iter__(self) -> "Stream[F]":
        return self

    def __next__(self) -> "F":
        if self.ended:
            raise StopIteration
        answer = self._conn._answer(self.id)
        if answer.done:
            self.ended = True
            self.end = answer.result()  # a refusal is raised here
            raise StopIteration
        frame: F = answer.frame
        return frame

    def pending(self) -> bool:
        return self._conn._proto.has_event()
