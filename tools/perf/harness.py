"""What every benchmark shares: a temporary daemon, streams, concurrent senders, statistics,
the result rows, the table and the JSON.

Stdlib only, plus the project's own blocking client (`bench_wire.client`). Times come from
`time.perf_counter_ns`; memory from /proc/<pid>/status.
"""

import base64
import codecs
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from bench_wire.client import Client, request
from bench_wire.errors import WireError
from tests.support.daemon import UNLIMITED
from tests.support.wait import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
BIN = os.path.dirname(PY)
BENCH = os.path.join(BIN, "bench")

# A realistic small message: one line of subject, a few hundred bytes of body.
SUBJECT = "perf: status"
BODY = "status: all green\n\n" + "lorem ipsum dolor sit amet, " * 8 + "\n"

now_ns = time.perf_counter_ns


def poll(pred, timeout: float, what: str, interval: float = 0.02) -> None:
    """Until pred() is true; TimeoutError naming `what` at the deadline."""
    wait_for(pred, timeout, what, error=TimeoutError, pause=interval, max_pause=interval)


def ms(ns: float) -> float:
    return ns / 1e6


def secs(ns: float) -> float:
    return ns / 1e9


# ---------------------------------------------------------------- statistics


def median(xs) -> float:
    s = sorted(xs)
    if not s:
        raise ValueError("median of nothing")
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(xs, q: float) -> float:
    """Nearest-rank percentile (q in 0-100): a value that was actually observed."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of nothing")
    k = max(1, math.ceil(q / 100 * len(s)))
    return float(s[k - 1])


def p99(xs) -> float:
    return percentile(xs, 99)


# ---------------------------------------------------------------- processes and files


# The product's packages: an install (pip) compiles them to bytecode.
PACKAGES = ("bench_cli", "bench_wire", "benchd", "bench_mcp", "bench_bridge")


def compile_product() -> None:
    """As installed: pip compiles the packages at install time, so every start (a send,
    a daemon, a session's `bench`) reads bytecode. An editable checkout under
    PYTHONDONTWRITEBYTECODE (set on some machines, CI's among them) would compile each
    module from source at every process start instead (the daemon's ~90 modules cost
    ~0.1-0.15 s a start) and measure the compiler rather than bench."""
    subprocess.run(
        [PY, "-m", "compileall", "-q", *(os.path.join(ROOT, p) for p in PACKAGES)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def clean_env(bench_dir: str | None = None) -> dict:
    """The harness's environment without any BENCH_* (a session's token would be refused
    by our daemons), with the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    if bench_dir is not None:
        env["BENCH_DIR"] = bench_dir
    return env


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(rest.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """One benchd in a BENCH_DIR, started as a subprocess; ready when it prints its line."""

    def __init__(self, bench_dir: str, *opts: str):
        self.dir = bench_dir
        self.opts = list(opts)
        self.proc: subprocess.Popen | None = None
        self.err_path = os.path.join(bench_dir, "perf-stderr.txt")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 120.0) -> int:
        """Start benchd; returns the ns from process start to its ready line."""
        cmd = [PY, "-m", "benchd.server.app", "--dir", self.dir, *UNLIMITED, *self.opts]
        err = open(self.err_path, "ab")  # noqa: SIM115 - the daemon's stderr, open for its lifetime
        t0 = now_ns()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=clean_env(self.dir),
            cwd=ROOT,
        )
        err.close()
        line = self._read_line(timeout)
        t1 = now_ns()
        if not line.startswith(b"benchd ready"):
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            raise RuntimeError(f"benchd did not start in {self.dir}: {line!r} {self.stderr()}")
        return t1 - t0

    def _read_line(self, timeout: float) -> bytes:
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return buf + b" (timed out)"
            chunk = os.read(fd, 4096)
            if not chunk:
                return buf + b" (benchd exited)"
            buf += chunk
        return buf

    def stderr(self) -> str:
        try:
            with open(self.err_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            rc = None if self.proc is None else self.proc.returncode
            raise RuntimeError(f"benchd died (exit {rc}): {self.stderr()}")

    def stop(self, timeout: float = 60.0) -> None:
        """A clean stop, as `bench down` does it (the `stop` verb; SIGTERM if that cannot be
        sent); raises if benchd misbehaved. Not SIGTERM first: benchd prints its ready line
        before its signal handler is installed, so an early SIGTERM kills it uncleanly."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        died = proc.poll() is not None
        if not died:
            try:
                with Client(self.dir, timeout=10.0) as conn:
                    conn.call(request("stop", {}))
            except (WireError, OSError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                proc.stdout.close()
                raise RuntimeError(f"benchd did not stop within {timeout}s") from None
        proc.stdout.close()
        if died or proc.returncode != 0:
            raise RuntimeError(f"benchd exited {proc.returncode}: {self.stderr()}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop()
        else:
            self.kill()

    def connect(self, timeout: float | None = 60.0) -> Client:
        return Client(self.dir, timeout=timeout)

    def memory(self) -> dict[str, int]:
        self.check_alive()
        return proc_status(self.pid)


def call(conn: Client, verb: str, **fields) -> dict:
    return conn.call(request(verb, fields))


def send_mail(conn: Client, to: str, body: str = BODY, subject: str = SUBJECT) -> dict:
    return conn.call(request("mail/send", {"to": to, "body": body, "subject": subject}))


def run_threads(n: int, target, *args) -> int:
    """Run the generator function target(i, *args) in n threads: each runs up to its first
    `yield` (set-up), then all are released together to run the rest. Returns the ns from
    the release to the last one's end; the first exception of any thread is raised here."""
    barrier = threading.Barrier(n + 1)
    errors: list[BaseException] = []
    ends = [0] * n

    def body(i: int) -> None:
        try:
            gen = target(i, *args)
            next(gen)  # set-up, before the barrier
            barrier.wait()
            next(gen, None)  # the timed work
        except threading.BrokenBarrierError:
            return
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            errors.append(err)
            barrier.abort()
        finally:
            ends[i] = now_ns()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = now_ns()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return max(ends) - t0


def send_concurrently(bench_dir: str, to: str, total: int, clients: int) -> int:
    """`total` sends to `to` from `clients` threads, each with its own persistent connection;
    returns the ns from the common start to the last answer."""
    shares = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]

    def client(i: int):
        conn = Client(bench_dir, timeout=120.0)
        call(conn, "hello")
        yield
        try:
            for _ in range(shares[i]):
                send_mail(conn, to)
        finally:
            conn.close()

    return run_threads(clients, client)


class Stream(threading.Thread):
    """A streaming request (events follow, session/tail follow) read by its own thread,
    every frame stamped with perf_counter_ns on arrival."""

    def __init__(self, bench_dir: str, verb: str, **fields):
        super().__init__(daemon=True)
        self.conn = Client(bench_dir, timeout=None)
        self.cond = threading.Condition()
        self.frames: list[tuple[int, dict]] = []
        self.error: BaseException | None = None
        self.ended = False
        self.conn.send(request(verb, fields))
        self.start()

    def on_frame(self, t: int, frame: dict) -> None:
        self.frames.append((t, frame))

    def run(self) -> None:
        try:
            while True:
                frame = self.conn.recv()
                t = now_ns()
                with self.cond:
                    self.on_frame(t, frame)
                    self.cond.notify_all()
                if frame.get("ok") is False or frame.get("type") == "end":
                    if frame.get("ok") is False:
                        self.error = RuntimeError(f"stream refused: {frame}")
                    break
        except BaseException as err:  # noqa: BLE001 - reported to the waiter
            if not self.ended:
                self.error = err
        finally:
            with self.cond:
                self.ended = True
                self.cond.notify_all()

    def wait(self, pred, timeout: float, what: str):
        """Wait until pred() (called under the lock) is truthy; return its value."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred()
                if v:
                    return v
                if self.error is not None:
                    raise RuntimeError(f"stream failed while waiting for {what}: {self.error}")
                if self.ended:
                    raise RuntimeError(f"stream ended while waiting for {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
                self.cond.wait(left)

    def close(self) -> None:
        self.ended = True
        try:
            self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.join(5)
        self.conn.close()


class EventStream(Stream):
    """`events` with follow: the events of one kind, each with its arrival time."""

    def __init__(self, bench_dir: str, kind: str, since: int = 0):
        self.events: list[tuple[int, dict]] = []
        super().__init__(bench_dir, "events", kind=kind, since=since, follow=True)

    def on_frame(self, t: int, frame: dict) -> None:
        if frame.get("type") == "event":
            self.events.append((t, frame["event"]))


class TailStream(Stream):
    """`session/tail` with follow: the session's output as text, and when each part came."""

    def __init__(self, bench_dir: str, handle: str):
        self.text = ""
        self.ends: list[int] = []  # text offset where each frame ended
        self.times: list[int] = []  # arrival time of each frame
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        super().__init__(bench_dir, "session/tail", handle=handle, follow=True)

    def on_frame(self, t: int, frame: dict) -> None:
        if frame.get("type") == "output":
            self.text += self._dec.decode(base64.b64decode(frame["data"]))
            self.ends.append(len(self.text))
            self.times.append(t)

    def time_at(self, offset: int) -> int:
        """Arrival time of the frame that carried text[offset]."""
        return self.times[bisect_left(self.ends, offset + 1)]

    def last_before(self, offset: int) -> int | None:
        """Arrival time of the last frame that ended at or before `offset`."""
        i = bisect_left(self.ends, offset + 1) - 1
        return self.times[i] if i >= 0 else None

    def find(self, needle: str, start: int) -> int:
        return self.text.find(needle, start)


def events_in_log(bench_dir: str, *kinds: str) -> list[dict]:
    """Events of the given kinds straight from events.jsonl (read-only, after the fact)."""
    out = []
    with open(os.path.join(bench_dir, "events.jsonl"), "rb") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("kind") in kinds:
                out.append(e)
    return out


# ---------------------------------------------------------------- results


@dataclass
class Result:
    """One row: the figure, its baseline, their ratio and the target the ratio must meet.

    `op` is "<=" or ">="; `ratio` is figure/baseline unless `ratio_note` says otherwise.
    """

    name: str
    unit: str
    value: float | None
    baseline: float | None
    ratio: float | None
    op: str
    target: float
    params: dict = field(default_factory=dict)
    ratio_note: str = ""
    error: str | None = None

    @property
    def passed(self) -> bool | None:
        if self.error is not None or self.ratio is None:
            return None
        return self.ratio <= self.target if self.op == "<=" else self.ratio >= self.target

    @property
    def target_text(self) -> str:
        note = f" ({self.ratio_note})" if self.ratio_note else ""
        return f"{self.op} {self.target:g}x{note}"

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "value": self.value,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "target": self.target_text,
            "pass": bool(self.passed) if self.error is None else False,
            "params": dict(self.params, **({"error": self.error} if self.error else {})),
        }


def crashed(name: str, error: str) -> Result:
    return Result(name, "", None, None, None, "", 0, error=error)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    a = abs(value)
    if a >= 1000:
        text = f"{value:,.0f}"
    elif a >= 100:
        text = f"{value:.0f}"
    elif a >= 10:
        text = f"{value:.1f}"
    elif a >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}".rstrip()


def table(results: list[Result]) -> str:
    rows = [("name", "figure", "baseline", "ratio", "target", "pass")]
    for r in results:
        if r.error is not None:
            rows.append((r.name, "CRASHED", "-", "-", "-", "ERROR"))
            continue
        rows.append(
            (
                r.name,
                fmt(r.value, r.unit),
                fmt(r.baseline, r.unit),
                "-" if r.ratio is None else f"{r.ratio:.3g}x",
                r.target_text,
                "pass" if r.passed else "MISS",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i in (0, 4, 5) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: str, results: list[Result]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump([r.as_json() for r in results], f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- the run's context


class Context:
    """Per run: quick or full, temporary directories, and figures benchmarks share."""

    def __init__(self, quick: bool, log=print):
        self.quick = quick
        self.log = log
        self.shared: dict = {}
        self._dirs: list[str] = []

    def size(self, quick, full):
        return quick if self.quick else full

    def tmpdir(self, tag: str) -> str:
        # Short: BENCH_DIR/benchd.sock must fit AF_UNIX's 108 bytes.
        d = tempfile.mkdtemp(prefix=f"bp{tag}-", dir="/tmp")
        self._dirs.append(d)
        return d

    def remove(self, d: str) -> None:
        shutil.rmtree(d, ignore_errors=True)
        if d in self._dirs:
            self._dirs.remove(d)

    def cleanup(self) -> None:
        """Hand the run's directories to a detached `rm -rf` and return at once.

        A full run leaves some 200,000 message files behind; deleting them took longer
        than several benchmarks (about 6 minutes on the development machine). The
        directories are renamed first, so nothing else can pick them up, and the
        deletion goes on after the run has printed its table and exited. It must not
        overlap a benchmark: files created near a burst of deletions cost several times
        more on ext4, so it only starts once every daemon is stopped."""
        doomed = []
        for d in self._dirs:
            gone = d + ".rm"
            try:
                os.rename(d, gone)
            except OSError:
                continue
            doomed.append(gone)
        self._dirs.clear()
        if doomed:
            subprocess.Popen(
                ["rm", "-rf", "--", *doomed],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )


# ---------------------------------------------------------------- rounds against a baseline


def timed_rate(batch, seconds: float, chunk: int) -> float:
    """Operations per second: `batch(chunk)` (returning the ns it took, or None to be
    timed here) again and again until `seconds` have been spent in it."""
    spent = done = 0
    while spent < seconds * 1e9:
        t0 = now_ns()
        took = batch(chunk)
        spent += took if took is not None else now_ns() - t0
        done += chunk
    return done / (spent / 1e9)


def rounds(n: int, bench, base) -> dict:
    """Run the baseline and bench alternately, `n` rounds of each (`base()` then
    `bench()`, each returning its figure): a slow spell of the disk or the machine falls
    on both sides of a round. Returns the per-round figures and ratios (bench/base), and
    the median ratio with its spread."""
    bench_v: list[float] = []
    base_v: list[float] = []
    for _ in range(n):
        base_v.append(base())
        bench_v.append(bench())
    ratios = [b / a for b, a in zip(bench_v, base_v, strict=True)]
    return {
        "ratio": median(ratios),
        "ratios": [round(r, 3) for r in ratios],
        "spread": [round(min(ratios), 3), round(max(ratios), 3)],
        "bench": bench_v,
        "base": base_v,
    }
