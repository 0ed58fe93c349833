"""A daemon run by an unprivileged user the test makes: the same `Benchd`, its daemon and
every `bench` call started through setpriv as that user.

The test's Python may live where that user cannot read (pyenv under /root, mode 0700).
Each command therefore runs in a mount namespace of its own in which /root is an empty
tmpfs holding only the interpreter's tree (bound read-only at its own path); the user
reads nothing else of /root there, and the host's mounts are untouched.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import time

from tests.support.daemon import Benchd

# Make the user, unless the test runs without root (then it skips, saying so).
PREFIX = "benchbox-"


def why_not() -> str | None:
    """Why an unprivileged user cannot be made and acted as here, or None."""
    if os.geteuid() != 0:
        return "needs root to create and act as an unprivileged user (useradd, setpriv)"
    for tool in ("setpriv", "useradd", "userdel", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool} to act as an unprivileged user"
    return None


def _userdel(name: str) -> None:
    for _ in range(50):  # userdel refuses while a process of the user is still exiting
        r = subprocess.run(["userdel", name], capture_output=True, text=True)
        if r.returncode in (0, 6):  # 6: no such user
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"could not remove the user {name}: {r.stderr}")
    subprocess.run(["groupdel", name], capture_output=True)


def make_user() -> str:
    """A fresh user for this process (removing ones a killed run left behind)."""
    for entry in pwd.getpwall():
        pid = entry.pw_name.removeprefix(PREFIX)
        if (
            entry.pw_name.startswith(PREFIX)
            and pid.isdigit()
            and not os.path.exists(f"/proc/{pid}")
        ):
            _userdel(entry.pw_name)
    name = f"{PREFIX}{os.getpid()}"
    _userdel(name)
    r = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r
    return name


remove_user = _userdel


def _interpreter_tree() -> str:
    """The installation directory of the interpreter the venv points at."""
    return os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))


def as_user(user: str, argv: list[str]) -> list[str]:
    """`argv` run as `user`, with the interpreter's tree readable (see the module doc)."""
    tree = _interpreter_tree()
    script = 'u=$1; shift; exec setpriv --reuid="$u" --regid="$u" --clear-groups "$@"'
    if tree.startswith("/root/"):
        # Bind the tree aside, cover /root with an empty tmpfs, move the tree back.
        script = (
            "u=$1; t=$2; shift 2; tmp=$(mktemp -d /tmp/bench-py.XXXXXX) && "
            'mount --bind "$t" "$tmp" && mount -o remount,bind,ro "$tmp" && '
            'mount -t tmpfs -o mode=755 tmpfs /root && mkdir -p "$t" && '
            'mount --move "$tmp" "$t" && rmdir "$tmp" || exit 125; '
            'exec setpriv --reuid="$u" --regid="$u" --clear-groups "$@"'
        )
        return [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            user,
            tree,
            *argv,
        ]
    return ["sh", "-c", script, "sh", user, *argv]


class UserBenchd(Benchd):
    """A Benchd whose daemon and CLI run as `user`; BENCH_DIR and its scratch are theirs."""

    def __init__(self, bench_dir: str, opts: list[str], user: str):
        super().__init__(bench_dir, opts, cwd="/")
        self.user = user
        entry = pwd.getpwnam(user)
        for path in (bench_dir, self.scratch):
            os.chown(path, entry.pw_uid, entry.pw_gid)
            os.chmod(path, 0o700)
        self.wrap = lambda argv: as_user(user, argv)

    def env(self, **extra) -> dict:
        env = super().env(**extra)
        env["HOME"] = self.scratch
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def events(self, since: int = 0, kind: str | None = None) -> list[dict]:
        # The daemon answers its own user only: the events come through its CLI.
        args = ["events", "--after", str(since), "--json"]
        if kind:
            args += ["--kind", kind]
        r = self.bench(*args)
        assert r.rc == 0, r
        return [json.loads(line) for line in r.out.splitlines() if line.strip()]
