"""The compiled hook client (bench_cli/bench_hook.c) against a scripted socket peer:
what it sends, how it reads answers it must decode (escapes, surrogate pairs, keys it
does not know, refusals) and answers it must refuse. Its end-to-end use by adapter
sessions is in tests/conformance/test_agents.py (the daemon picks it when it sits
beside `bench`)."""

import json
import os
import re
import shutil
import socket
import subprocess
import threading

import pytest

from bench_wire import verbs
from benchd.runtime import adapters

SOURCE = os.path.join(os.path.dirname(__file__), "..", "..", "bench_cli", "bench_hook.c")
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> str:
    if CC is None:
        pytest.skip("no C compiler here: adapter sessions use `bench hook` instead")
    out = str(tmp_path_factory.mktemp("hookc") / "bench-hook")
    subprocess.run([CC, "-O2", "-Wall", "-Werror", "-o", out, SOURCE], check=True)
    return out


class Peer:
    """A Unix socket at BENCH_DIR/benchd.sock answering each request with `answer`."""

    def __init__(self, d: str, answer: bytes):
        self.got: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(os.path.join(d, "benchd.sock"))
        self.sock.listen(4)
        self.answer = answer
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.got.append(data)
                conn.sendall(self.answer)


def run(client: str, d: str, *args: str, stdin: bytes = b"{}") -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "BENCH_DIR": d, "BENCH_TOKEN": 'tok"en'}
    return subprocess.run([client, *args], input=stdin, env=env, capture_output=True, timeout=30)


def test_sends_one_report_and_prints_the_decoded_output(client, tmp_path):
    out = {"decision": "block", "reason": "You have mail from ana: /m/é\U0001f4e8.md"}
    answer = {"type": "agent/report-ok", "state": {"x": [1, {"y": None}]}, "id": 1}
    answer["output"] = json.dumps(out)  # a string holding JSON: quotes and escapes
    line = json.dumps(answer, ensure_ascii=True).encode() + b"\n"  # \\u escapes, surrogates
    peer = Peer(str(tmp_path), line)
    payload = '{"hook_event_name":"Stop","n":"\\u0001 \\" é"}'.encode()
    r = run(client, str(tmp_path), "stop", stdin=payload)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == out
    (sent,) = peer.got
    req = json.loads(sent)
    assert req == {
        "verb": "agent/report",
        "token": 'tok"en',
        "event": "stop",
        "payload": payload.decode(),
        "id": 1,
    }


def test_a_refusal_exits_1_with_its_code_never_2(client, tmp_path):
    err = {"code": "forbidden", "message": "only a session's own agent reports ✓"}
    line = json.dumps({"type": "error", "ok": False, "error": err, "id": 1}).encode() + b"\n"
    Peer(str(tmp_path), line)
    r = run(client, str(tmp_path), "prompt")
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.decode() == "bench: only a session's own agent reports ✓ [forbidden]\n"


@pytest.mark.parametrize(
    "answer",
    [b"not json\n", b'{"output": "unterminated\n', b'{"output": "\\uZZZZ"}\n', b"[1]\n", b""],
)
def test_an_answer_it_cannot_read_is_an_error_not_a_guess(client, tmp_path, answer):
    Peer(str(tmp_path), answer)
    r = run(client, str(tmp_path), "stop")
    assert r.returncode == 1 and r.stdout == b""
    assert b"[protocol]" in r.stderr


def test_an_oversized_event_is_sent_empty(client, tmp_path):
    peer = Peer(str(tmp_path), b'{"type":"agent/report-ok","state":"idle","id":1}\n')
    r = run(client, str(tmp_path), "stop", stdin=b"x" * (256 * 1024 + 1))
    assert r.returncode == 0 and r.stdout == b""
    assert json.loads(peer.got[0])["payload"] == ""


def test_usage_and_missing_daemon_are_clear_errors(client, tmp_path):
    r = run(client, str(tmp_path), "bogus")
    assert r.returncode == 1 and b"unknown hook event bogus [usage]" in r.stderr
    r = run(client, str(tmp_path))
    assert r.returncode == 1 and b"[usage]" in r.stderr
    r = run(client, str(tmp_path / "none"), "stop")
    assert r.returncode == 1 and b"no daemon is running" in r.stderr and b"[no-daemon]" in r.stderr


def test_the_daemon_picks_the_compiled_client_beside_bench(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    assert adapters.hook_command(str(bindir)) == ["bench", "hook"]  # neither: PATH's bench
    (bindir / "bench").write_text("#!/bin/sh\n")
    (bindir / "bench").chmod(0o755)
    assert adapters.hook_command(str(bindir)) == [f"{bindir}/bench", "hook"]
    (bindir / "bench-hook").write_text("#!/bin/sh\n")
    (bindir / "bench-hook").chmod(0o755)
    assert adapters.hook_command(str(bindir)) == [f"{bindir}/bench-hook"]


def test_it_knows_the_events_the_python_client_knows():
    with open(SOURCE) as f:
        src = f.read()
    listed = src[src.index("EVENTS[] = {") : src.index("NULL};")]
    assert re.findall(r'"([a-z-]+)"', listed) == list(verbs.HOOK_EVENTS)
