"""The state directory: refuse what is unsafe before the daemon writes anything in it
(docs/files.md, "The state directory is checked before it is used"), take it for one
daemon (an flock on `benchd.lock`, released by the kernel however the daemon exits), and
keep the few files the daemon keeps about itself there (`Damage`, `hold_room`). The
checks are os/stat calls only, so `bench up` runs the same ones first (`main`).
"""

import errno
import fcntl
import os
import stat
import sys
from collections.abc import Callable

import msgspec

from bench_wire import messages as m
from bench_wire.client import resolve_dir, socket_path
from bench_wire.errors import WireError
from benchd.core.names import Log
from benchd.store.fileio import write_all
from benchd.store.journal import REPLAY_TMP, SEGMENTS

DAMAGE_REPORT = "journal.damage"  # the journal damage found at starts, until acknowledged
ROOM = "disk.reserve"  # a little room held for the next start

# The names the daemon opens in BENCH_DIR (SQLite adds -wal, -shm and -journal).
FILES = (
    "benchd.lock",
    "benchd.log",
    "benchd.out",
    "events.jsonl",
    "events.1.jsonl",  # the rotated log (benchd.store.eventlog)
    "events.jsonl.new",  # a rotation's new log, before its rename
    "index.sqlite",
    *SEGMENTS,
    REPLAY_TMP,
    "outbox.sqlite",  # an earlier version's job outbox, until it is moved into jobs/
    "presets.json",
    DAMAGE_REPORT,
    ROOM,
)
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
BOXES = ("inbox", "read", "tmp")
# (The socket is not checked: the daemon renames a new one over whatever is at its path,
# which never follows a link.)


class UnsafeStateDir(Exception):
    """BENCH_DIR cannot be used safely; the message is one line for the user."""


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISREG, "a regular file"),
)


def _kind(mode: int) -> str:
    return next((name for is_kind, name in _KINDS if is_kind(mode)), "a special file")


def _owner(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_ancestors(path: str, uid: int | None = None) -> None:
    """Every directory above `path` (resolved) is ours or root's and not writable by others
    (a root-owned sticky directory such as /tmp is fine)."""
    uid = os.getuid() if uid is None else uid
    d = os.path.dirname(os.path.realpath(path))
    while True:
        st = os.stat(d)
        if st.st_uid not in (0, uid):
            raise UnsafeStateDir(
                f"{d} (above BENCH_DIR) is owned by {_owner(st.st_uid)}, who could replace "
                "BENCH_DIR: use a directory in a tree only you (or root) own"
            )
        sticky_root = st.st_uid == 0 and st.st_mode & stat.S_ISVTX
        if st.st_mode & 0o022 and not sticky_root:
            raise UnsafeStateDir(
                f"{d} (above BENCH_DIR) is writable by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}), who could replace BENCH_DIR: "
                "use a directory in a tree only you can write"
            )
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent


def check_state_dir(bench_dir: str) -> None:
    """Refuse (UnsafeStateDir) a BENCH_DIR the daemon cannot use safely; tighten the modes
    of its own files to 0600. Called after BENCH_DIR was created or tightened to 0700."""
    uid = os.getuid()
    st = os.lstat(bench_dir)
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(bench_dir)  # a link to BENCH_DIR is fine; its target is checked
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeStateDir(f"{bench_dir} is {_kind(st.st_mode)}, not a directory")
    if st.st_uid != uid:
        raise UnsafeStateDir(
            f"{bench_dir} is owned by {_owner(st.st_uid)}, not by you: refusing to use "
            "another user's directory as BENCH_DIR"
        )
    if st.st_mode & 0o077:
        raise UnsafeStateDir(
            f"{bench_dir} has mode {stat.S_IMODE(st.st_mode):04o}; BENCH_DIR must be 0700"
        )
    check_ancestors(bench_dir, uid)
    for name in FILES:
        suffixes = SQLITE_SUFFIXES if name.endswith(".sqlite") else ("",)
        for suffix in suffixes:
            _check_file(os.path.join(bench_dir, name + suffix), uid)
    jobs = os.path.join(bench_dir, "jobs")  # the job records (benchd.store.outbox)
    if _check_entry(jobs, uid, stat.S_ISDIR, "a directory"):
        for sub in ("open", "done", "tmp"):
            _check_entry(os.path.join(jobs, sub), uid, stat.S_ISDIR, "a directory")
    mail = os.path.join(bench_dir, "mail")
    if _check_entry(mail, uid, stat.S_ISDIR, "a directory"):
        with os.scandir(mail) as it:
            for entry in it:
                box = entry.path
                if not _check_entry(box, uid, stat.S_ISDIR, "a directory"):
                    continue
                for sub in BOXES:
                    _check_entry(os.path.join(box, sub), uid, stat.S_ISDIR, "a directory")


def _check_entry(path: str, uid: int, is_kind: Callable[[int], bool], kind: str) -> bool:
    """False if absent; raises unless `path` is (without following links) `kind`, ours."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not is_kind(st.st_mode):
        raise UnsafeStateDir(
            f"{path} is {_kind(st.st_mode)}, not {kind}: refusing to follow or replace it; "
            "remove it"
        )
    if st.st_uid != uid:
        raise UnsafeStateDir(f"{path} is owned by {_owner(st.st_uid)}, not by you; remove it")
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022:
        raise UnsafeStateDir(
            f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            "make it 0700"
        )
    return True


def _check_file(path: str, uid: int) -> None:
    if _check_entry(path, uid, stat.S_ISREG, "a regular file"):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode & 0o077:
            os.chmod(path, 0o600, follow_symlinks=False)  # from before the daemon's umask


# ---------------------------------------------------------------- no-follow opens


def read_regular(path: str) -> bytes:
    """The contents of `path` only if it is a regular file: never follows a final symlink
    and never blocks on a FIFO (OSError otherwise: ELOOP, or EINVAL for a non-regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "not a regular file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


def is_real_dir(path: str) -> bool:
    """A directory, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class Damage:
    """The journal damage not yet acknowledged (docs/durability.md, "The journal"): one
    JSON object per line of BENCH_DIR/journal.damage."""

    def __init__(self, bench_dir: str, log: Log, found: list[m.JournalDamaged]) -> None:
        self.path = os.path.join(bench_dir, DAMAGE_REPORT)
        self.log = log
        self.found = found

    @classmethod
    def load(cls, bench_dir: str, log: Log) -> "Damage":
        """The reports earlier starts kept (a line that does not read is skipped: the
        event log has it too)."""
        found: list[m.JournalDamaged] = []
        try:
            with open(os.path.join(bench_dir, DAMAGE_REPORT), "rb") as f:
                raw = f.read()
        except OSError:
            raw = b""
        for line in raw.split(b"\n"):
            try:
                found.append(msgspec.json.decode(line, type=m.JournalDamaged))
            except msgspec.ValidationError:
                log.warning("unreadable journal damage report skipped", item=repr(line))
            except msgspec.DecodeError:
                continue  # a torn line (or the last, empty one)
        return cls(bench_dir, log, found)

    def keep(self, events: list[m.Event]) -> None:
        """This start's journal/damaged events, once logged: appended durably (if the disk
        refuses, the event log and benchd.log still have them)."""
        found = [e for e in events if isinstance(e, m.JournalDamaged)]
        if not found:
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                write_all(fd, b"".join(msgspec.json.encode(e) + b"\n" for e in found))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            self.log.error("journal damage report not kept", error=str(err))
        self.found += found

    def ack(self) -> int:
        """journal/ack: the reports are removed; how many there were."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise WireError("io-error", f"the damage report could not be removed: {err}") from None
        n, self.found = len(self.found), []
        self.log.info("journal damage acknowledged", reports=n)
        return n


# disk.reserve: room for a start after mail filled the disk (docs/durability.md, "Room for
# the next start").
DISK_RESERVE = 64 << 20  # free bytes the journal never takes to preallocate its segments
ROOM_BYTES = 256 << 10  # never more than DISK_RESERVE


def release_room(root: str) -> int:
    """Remove the file; the bytes it gave back."""
    path = os.path.join(root, ROOM)
    try:
        size = os.lstat(path).st_size
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return size


def keep_room(root: str, size: int) -> int:
    """Hold up to `size` bytes again (fewer on a disk without them); the bytes held."""
    if size <= 0:
        return 0
    fd = os.open(os.path.join(root, ROOM), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    held = 0
    try:
        chunk = bytes(min(size, 64 << 10))
        while held < size:
            try:
                write_all(fd, chunk[: size - held], held)
            except OSError as err:
                if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                os.ftruncate(fd, held)  # a partial chunk: keep what was whole
                break
            held += min(len(chunk), size - held)
        os.fsync(fd)
    finally:
        os.close(fd)
    return held


def hold_room(bench_dir: str, reserve: int, log: Log) -> None:
    """Hold room on the disk for the next start (as much as there is, up to a cap)."""
    want = min(ROOM_BYTES, reserve)
    try:
        held = keep_room(bench_dir, want)
    except OSError as err:
        held = 0
        log.error("no room held for the next start", error=str(err))
    if held < want:
        log.warning("less room held for the next start", held=held, wanted=want)


def take_state_dir(wanted: str | None) -> str | int:
    """The state directory, checked and locked; or the exit code after saying why."""
    bench_dir = None
    try:
        bench_dir = resolve_dir(wanted)
        socket_path(bench_dir)
    except WireError as err:
        print(f"benchd: {err.message}", file=sys.stderr)
        return 2
    problem = directory_problem(bench_dir, wanted or bench_dir)
    if problem is not None:
        print(f"benchd: {problem}", file=sys.stderr)
        return 2
    try:
        lock_fd = os.open(
            os.path.join(bench_dir, "benchd.lock"),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
    except OSError as err:
        print(f"benchd: cannot use {wanted or bench_dir}: {err}", file=sys.stderr)
        return 2
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"benchd: another benchd already serves {bench_dir}", file=sys.stderr)
        return 1
    os.ftruncate(lock_fd, 0)
    write_all(lock_fd, f"{os.getpid()}\n".encode())
    return bench_dir  # the fd stays open (and locked) until the process ends


def directory_problem(bench_dir: str, shown: str | None = None) -> str | None:
    """Why `bench_dir` cannot be used (made 0700 if it can), in one line; or None."""
    try:
        os.makedirs(bench_dir, mode=0o700, exist_ok=True)
        st = os.stat(bench_dir)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(bench_dir, 0o700)  # ours: tightened (another's is refused below)
        check_state_dir(bench_dir)
    except UnsafeStateDir as err:
        return f"unsafe BENCH_DIR: {err}"
    except OSError as err:
        return f"cannot use {shown or bench_dir}: {err}"
    return None


def main(argv: list[str] | None = None) -> int:
    """`python -m benchd.store.statedir DIR`: BENCH_DIR made and checked as the daemon
    will, for `bench up` (the clients import nothing of benchd). Exit 0, or 2 with the
    reason in one line on stderr."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m benchd.store.statedir BENCH_DIR", file=sys.stderr)
        return 2
    problem = directory_problem(args[0])
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
