"""Tests of the stand-in agent (tests/standin/standin.py), run in a real pty.

Every wait is a read loop with a deadline on a pattern in the output; the only sleep is the one
that lets an --enter-guard-ms window pass, which is the behaviour under test.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import select
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from ptyprocess import PtyProcess

STANDIN = Path(__file__).resolve().parents[1] / "standin" / "standin.py"
DEADLINE = 10.0
PROMPT = b"standin> "
BP_ON = b"\x1b[?2004h"
BP_OFF = b"\x1b[?2004l"


def paste(text: str) -> bytes:
    return b"\x1b[200~" + text.encode() + b"\x1b[201~"


class Term:
    """A stand-in agent in a pty, with expect-style reads under a deadline."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ)
        full_env.pop("BENCH_HANDLE", None)
        full_env.update(env or {})
        self.proc = PtyProcess.spawn(
            [sys.executable, str(STANDIN), *args], env=full_env, dimensions=(24, 100)
        )
        self.out = b""
        self.pos = 0  # expect() searches from here
        self.eof = False

    def _read(self, timeout: float) -> None:
        if self.eof:
            time.sleep(min(timeout, 0.05))
            return
        ready, _, _ = select.select([self.proc.fd], [], [], max(0.0, timeout))
        if not ready:
            return
        try:
            data = os.read(self.proc.fd, 65536)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            data = b""
        if data:
            self.out += data
        else:
            self.eof = True

    def expect(self, pattern: bytes, timeout: float = DEADLINE) -> bytes:
        """Wait for pattern after the last match; return the output between the two."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.out.find(pattern, self.pos)
            if found >= 0:
                before = self.out[self.pos : found]
                self.pos = found + len(pattern)
                return before
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.eof and self.out.find(pattern, self.pos) < 0):
                raise AssertionError(
                    f"{pattern!r} not seen within {timeout}s; output since last match: "
                    f"{self.out[self.pos :]!r}"
                )
            self._read(remaining)

    def send(self, data: bytes) -> None:
        os.write(self.proc.fd, data)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.isalive():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"standin still running; output: {self.out[self.pos :]!r}")
            self._read(min(remaining, 0.05))
        return self.proc.exitstatus

    def close(self) -> None:
        if self.proc.isalive():
            self.proc.terminate(force=True)
        try:
            self.proc.close(force=True)
        except OSError:
            pass


@pytest.fixture
def spawn():
    terms: list[Term] = []

    def start(*args: str, env: dict[str, str] | None = None, ready: bool = True) -> Term:
        term = Term(list(args), env)
        terms.append(term)
        if ready:
            term.expect(PROMPT)
        return term

    yield start
    for term in terms:
        term.close()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def load_standin():
    spec = importlib.util.spec_from_file_location("standin_under_test", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- in a pty -----------------------------------------------------------------------------


def test_banner_prompt_and_bracketed_paste(spawn):
    term = spawn(env={"BENCH_HANDLE": "alice"}, ready=False)
    term.expect(BP_ON)
    term.expect(b"standin agent alice\r\n")
    term.expect(PROMPT)


def test_banner_without_handle(spawn):
    term = spawn(ready=False)
    term.expect(b"standin agent ?\r\n" + PROMPT)


def test_startup_delay_prints_nothing_first(spawn):
    term = spawn("--startup-delay", "0.3", ready=False)
    start = time.monotonic()
    before = term.expect(BP_ON)
    assert before == b""
    assert time.monotonic() - start >= 0.25
    term.expect(PROMPT)


def test_paste_then_enter_submits_and_records_pasted(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--record", str(record))
    term.send(paste("hello world"))
    term.expect(b"hello world")
    term.send(b"\r")
    term.expect(b"\r\nok: hello world\r\n" + PROMPT)
    [entry] = records(record)
    assert entry["line"] == "hello world"
    assert entry["pasted"] is True
    assert isinstance(entry["t"], float)


def test_typed_text_is_echoed_and_not_pasted(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--record", str(record))
    term.send(b"hix")
    term.expect(b"hix")
    term.send(b"\x7f")
    term.expect(b"\b \b")
    term.send(b"\r")
    term.expect(b"ok: hi\r\n" + PROMPT)
    assert [(e["line"], e["pasted"]) for e in records(record)] == [("hi", False)]


def test_newline_inside_paste_does_not_submit(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--record", str(record))
    term.send(paste("one\ntwo"))
    term.expect(b"one\r\ntwo")
    term.send(b"\r")
    term.expect(b"ok: one\r\ntwo\r\n" + PROMPT)
    assert [e["line"] for e in records(record)] == ["one\ntwo"]


def test_swallow_enters_needs_two_enters(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--swallow-enters", "1", "--record", str(record))
    term.send(paste("hix"))
    term.expect(b"hix")
    term.send(b"\r")
    # The backspace's echo shows the Enter before it was handled, silently.
    term.send(b"\x7f")
    assert term.expect(b"\b \b") == b""
    term.send(b"\r")
    term.expect(b"\r\nok: hi\r\n" + PROMPT)
    assert [(e["line"], e["pasted"]) for e in records(record)] == [("hi", True)]


def test_enter_guard_turns_fast_enter_into_newline(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    guard_ms = 300
    term = spawn("--enter-guard-ms", str(guard_ms), "--record", str(record))
    sent = time.monotonic()
    term.send(paste("hello") + b"\r")
    assert term.expect(b"hello\r\n") == b""
    # Let the guard window pass (the behaviour under test is time based).
    time.sleep(max(0.0, sent + 2 * guard_ms / 1000 - time.monotonic()))
    term.send(b"\r")
    before = term.expect(b"ok: hello\r\n\r\n" + PROMPT)
    assert b"ok:" not in before
    assert [e["line"] for e in records(record)] == ["hello\n"]


def test_escape_sequences_ignored(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--record", str(record))
    term.send(b"a\x1b[A\x1b[1;5Cb\x1bOPc\x1b[I")
    term.expect(b"abc")
    term.send(b"\r")
    term.expect(b"ok: abc\r\n")
    assert [e["line"] for e in records(record)] == ["abc"]


def write_fake_bench(path: Path, log: Path, exit_code: int = 0) -> Path:
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"if {exit_code}:\n"
        "    print('boom: no such handle', file=sys.stderr)\n"
        f"sys.exit({exit_code})\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_mail(path: Path, body: str) -> Path:
    path.write_text(
        f'---\nid: "20240101-7"\nfrom: alice\nto: bob\nsent: 2024-01-01T00:00:00Z\n---\n\n{body}\n'
    )
    return path


def test_ring_sends_next_number_with_bench_on_path(spawn, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "bench-argv.jsonl"
    write_fake_bench(bindir / "bench", log)
    mail = write_mail(tmp_path / "mail.md", "number 100")
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "BENCH_HANDLE": "bob"}
    record = tmp_path / "record.jsonl"
    term = spawn("--ring", "carol", "--record", str(record), env=env)
    term.send(paste(f"You have mail from alice: {mail}"))
    term.expect(str(mail).encode())
    term.send(b"\r")
    term.expect(b"sent number 101 to carol\r\n" + PROMPT)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["mail", "send", "carol", "--in-reply-to", "20240101-7", "-m", "number 101"]
    ]
    assert [e["line"] for e in records(record)] == [f"You have mail from alice: {mail}"]


def test_ring_sends_no_in_reply_to_for_a_mail_without_an_id(spawn, tmp_path):
    # A file without front matter has no id to answer: the number still goes on.
    log = tmp_path / "bench-argv.jsonl"
    bench = write_fake_bench(tmp_path / "fakebench", log)
    mail = tmp_path / "plain.md"
    mail.write_text("number 41\n")
    term = spawn("--ring", "carol", "--bench", str(bench))
    term.send(paste(f"You have mail from alice: {mail}") + b"\r")
    term.expect(b"sent number 42 to carol\r\n" + PROMPT)
    assert json.loads(log.read_text()) == ["mail", "send", "carol", "-m", "number 42"]


def test_ring_failure_does_not_crash(spawn, tmp_path):
    log = tmp_path / "bench-argv.jsonl"
    bench = write_fake_bench(tmp_path / "fakebench", log, exit_code=3)
    mail = write_mail(tmp_path / "mail.md", "number 7")
    term = spawn("--ring", "carol", "--bench", str(bench))
    term.send(paste(f"You have mail from alice: {mail}") + b"\r")
    term.expect(b"ring error: bench exited 3\r\n")
    term.expect(b"boom: no such handle\r\n" + PROMPT)
    term.send(paste(f"You have mail from alice: {tmp_path / 'missing.md'}") + b"\r")
    term.expect(b"ring error: cannot read")
    term.expect(PROMPT)
    term.send(b"still here\r")
    term.expect(b"ok: still here\r\n" + PROMPT)
    assert json.loads(log.read_text()) == [
        "mail",
        "send",
        "carol",
        "--in-reply-to",
        "20240101-7",
        "-m",
        "number 8",
    ]


def test_work_seconds_prints_working_before_prompt(spawn):
    term = spawn("--work-seconds", "0.2")
    term.send(b"go\r")
    term.expect(b"ok: go\r\nworking...\r\n")
    before = term.expect(PROMPT)
    assert before.count(b"working...\r\n") >= 1
    assert set(before.split(b"\r\n")) <= {b"working...", b""}


def test_busy_prints_forever_and_takes_input(spawn, tmp_path):
    record = tmp_path / "record.jsonl"
    term = spawn("--busy", "--record", str(record))
    term.expect(b"busy 5\r\n")
    term.send(b"x\r")
    term.expect(b"ok: x\r\n")
    term.expect(b"busy ")
    assert [e["line"] for e in records(record)] == ["x"]


def test_ctrl_d_on_empty_line_exits_zero(spawn):
    term = spawn()
    term.send(b"\x04")
    assert term.wait_exit() == 0
    term.expect(BP_OFF)


def test_ctrl_c_on_empty_line_exits_zero(spawn):
    term = spawn()
    term.send(b"\x03")
    assert term.wait_exit() == 0


def test_sigterm_disables_bracketed_paste(spawn):
    term = spawn()
    term.proc.kill(signal.SIGTERM)
    assert term.wait_exit() == 128 + signal.SIGTERM
    term.expect(BP_OFF)


# -- the line editor, fed byte by byte ----------------------------------------------------


def make_agent(*argv: str):
    standin = load_standin()
    out: list[str] = []
    agent = standin.Agent(standin.parse_args(list(argv)), out.append)
    return agent, out


def test_sequences_split_across_reads(tmp_path):
    record = tmp_path / "record.jsonl"
    agent, out = make_agent("--record", str(record))
    data = b"ab\x1b[Dc" + paste("x\ny\x1b[201 é") + b"\r"
    for i in range(len(data)):
        agent.feed(data[i : i + 1], now=float(i))
    assert [(e["line"], e["pasted"]) for e in records(record)] == [("abcx\ny\x1b[201 é", True)]
    assert "".join(out).endswith("ok: abcx\r\ny^[[201 é\r\nstandin> ")


def test_enter_guard_uses_time_since_last_input():
    agent, _ = make_agent("--enter-guard-ms", "100")
    agent.feed(paste("a"), now=10.0)
    agent.feed(b"\r", now=10.05)  # within the guard: a newline
    agent.feed(b"\r", now=10.2)  # the guard's own newline does not extend it: submits
    assert agent.buf == []


def test_mail_body_skips_front_matter():
    standin = load_standin()
    text = "---\nid: 5\nn: 9\n---\n\nnumber 100\n"
    assert standin.mail_body(text) == "\nnumber 100\n"
    assert standin.mail_body("number 3\n") == "number 3\n"


def test_on_mail_runs_the_command_with_the_path_and_shows_its_output(spawn, tmp_path):
    mail = write_mail(tmp_path / "mail.md", "number 7")
    script = tmp_path / "on-mail.sh"
    script.write_text('echo "got $1"; grep -c number "$1"; exit 2\n')
    term = spawn("--on-mail", f"sh {script}")
    term.send(paste(f"You have mail from alice: {mail}") + b"\r")
    term.expect(f"got {mail}\r\n1\r\n".encode())
    term.expect(b"on-mail error: exited 2\r\n" + PROMPT)
    term.send(b"still here\r")
    term.expect(b"ok: still here\r\n" + PROMPT)
