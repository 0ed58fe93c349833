"""Helpers shared by the reliability tests, the crash loop and the soak (waits are
tests.support.wait.wait_for).

Everything here reads what the daemon left on disk (mail files, the event log) or
talks to it over its Unix socket; nothing sleeps to synchronise (waits poll a
condition against a deadline).
"""

from __future__ import annotations

import json
import os
import re
import socket

import yaml

MAIL_ID_RE = re.compile(r"\d{8}T\d{6}\.\d{3}Z-\d{4}")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BadMailFile(Exception):
    pass


def parse_mail(data: bytes) -> tuple[dict, bytes]:
    """(front matter, body bytes) of a mail file; BadMailFile if it is not one."""
    if not data.startswith(b"---\n"):
        raise BadMailFile("no front matter")
    head, sep, body = data[4:].partition(b"\n---\n\n")
    if not sep:
        raise BadMailFile("front matter not closed")
    try:
        meta = yaml.safe_load(head.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise BadMailFile(f"front matter does not parse: {err}") from None
    if not isinstance(meta, dict):
        raise BadMailFile("front matter is not a mapping")
    for field in ("id", "from", "to", "date", "key"):
        if not isinstance(meta.get(field), str):
            raise BadMailFile(f"front matter lacks {field}")
    return meta, body


class MailScan:
    """Every file under BENCH_DIR/mail, classified."""

    def __init__(self) -> None:
        self.messages: list[dict] = []  # meta + body + path + state
        self.staged: list[str] = []  # anything left in a tmp/
        self.stray: list[str] = []  # anything that is not a well-formed message file

    def by_key(self) -> dict[tuple[str, str], list[dict]]:
        out: dict[tuple[str, str], list[dict]] = {}
        for msg in self.messages:
            out.setdefault((msg["meta"]["from"], msg["meta"]["key"]), []).append(msg)
        return out

    def count(self, handle: str | None = None) -> int:
        return sum(1 for x in self.messages if handle is None or x["meta"]["to"] == handle)


def scan_mail(bench_dir: str) -> MailScan:
    scan = MailScan()
    root = os.path.join(bench_dir, "mail")
    if not os.path.isdir(root):
        return scan
    for handle in sorted(os.listdir(root)):
        box = os.path.join(root, handle)
        if not os.path.isdir(box):
            scan.stray.append(box)
            continue
        for sub in sorted(os.listdir(box)):
            d = os.path.join(box, sub)
            if sub not in ("inbox", "read", "tmp") or not os.path.isdir(d):
                scan.stray.append(d)
                continue
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if sub == "tmp":
                    scan.staged.append(path)
                    continue
                mail_id = name[:-3] if name.endswith(".md") else None
                if mail_id is None or not MAIL_ID_RE.fullmatch(mail_id):
                    scan.stray.append(path)
                    continue
                try:
                    with open(path, "rb") as f:
                        meta, body = parse_mail(f.read())
                except FileNotFoundError:
                    if sub == "inbox":
                        continue  # retired by a wake meanwhile: read/ is listed after inbox/
                    scan.stray.append(path)
                    continue
                except (OSError, BadMailFile):
                    scan.stray.append(path)
                    continue
                if meta["id"] != mail_id or meta["to"] != handle:
                    scan.stray.append(path)
                    continue
                scan.messages.append({"meta": meta, "body": body, "path": path, "state": sub})
    return scan


class EventLogScan:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.torn: list[bytes] = []
        self.seq_errors: list[str] = []

    def of_kind(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("kind") == kind]


def scan_events(bench_dir: str) -> EventLogScan:
    """Parse events.jsonl line by line: events, torn lines, and any seq that does not
    strictly increase over the whole file."""
    out = EventLogScan()
    path = os.path.join(bench_dir, "events.jsonl")
    if not os.path.exists(path):
        return out
    with open(path, "rb") as f:
        data = f.read()
    last = 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except ValueError:
            out.torn.append(line)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int):
            out.torn.append(line)
            continue
        if obj["seq"] <= last:
            out.seq_errors.append(f"line {n}: seq {obj['seq']} after {last}")
        last = obj["seq"]
        out.events.append(obj)
    return out


def raw_connect(bench_dir: str, timeout: float = 10.0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(os.path.join(bench_dir, "benchd.sock"))
    return s


def recv_lines(sock: socket.socket, n: int, buf: bytearray | None = None) -> list[bytes]:
    """Read exactly n lines (raises EOFError when the peer closes first)."""
    buf = buf if buf is not None else bytearray()
    out: list[bytes] = []
    while len(out) < n:
        nl = buf.find(b"\n")
        if nl >= 0:
            out.append(bytes(buf[:nl]))
            del buf[: nl + 1]
            continue
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise EOFError(f"connection closed after {len(out)} of {n} lines")
        buf += chunk
    return out


def read_to_eof(sock: socket.socket, limit: int = 1 << 24) -> bytes:
    """Everything the peer sent until it closed (a reset after data ends it too)."""
    data = bytearray()
    while len(data) < limit:
        try:
            chunk = sock.recv(1 << 16)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


def tree(path: str) -> set[str]:
    """Every path under `path` (relative), directories included."""
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), path))
    return out


def concurrent_calls(bench_dir: str, reqs: list[dict], timeout: float = 30.0) -> list[dict]:
    """Send each request on its own connection, all released at the same instant by a
    barrier; return the answers in order."""
    import threading

    from bench_wire.client import Client

    conns = [Client(bench_dir, timeout=timeout) for _ in reqs]
    answers: list[dict | None] = [None] * len(reqs)
    start = threading.Barrier(len(reqs))

    def go(i: int) -> None:
        start.wait(timeout)
        conns[i].send(reqs[i])
        answers[i] = conns[i].recv()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(reqs))]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout)
    finally:
        for c in conns:
            c.close()
    assert all(a is not None for a in answers), f"unanswered requests: {answers}"
    return answers  # type: ignore[return-value]
