"""benchd.store.replay: damage to a committed record costs that record alone, is named,
and never shortens the event log or lets a seq be handed out twice.

Real files in a temporary state dir; a "crash" is the state the files are left in.
"""

import os

import pytest

from benchd.store import journal as J
from benchd.store.eventlog import EventLog
from benchd.store.replay import replay
from tests.support.clock import TestClock, still
from tests.unit.test_journal import _deliver, _tree


@pytest.fixture
def state(tmp_path):
    """A state dir with one mailbox and an event log, and an open journal."""
    root = str(tmp_path / "state")
    for sub in ("inbox", "read", "tmp"):
        os.makedirs(f"{root}/mail/bob/{sub}")
    log = f"{root}/events.jsonl"
    log_fd = os.open(log, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    j = J.Journal(root, lambda: log_fd, segment_bytes=64 * 1024, now=still)
    j.open()
    yield root, log, log_fd, j
    j.close()
    os.close(log_fd)


def _flip(root: str, seq_index: int, at: int) -> J.Record:
    """Flip one byte `at` bytes into the seq_index-th record of segment 0."""
    path = os.path.join(root, "journal-0")
    with open(path, "rb") as f:
        good, _bad = J.read_segment(f.read())
    rec = good[seq_index]
    with open(path, "r+b") as f:
        f.seek(rec.offset + at)
        b = f.read(1)
        f.seek(rec.offset + at)
        f.write(bytes([b[0] ^ 0x20]))
    return rec


def _lines(log: str) -> list[bytes]:
    with open(log, "rb") as f:
        return f.read().split(b"\n")[:-1]


def test_a_bad_middle_record_is_skipped_alone_and_named(state):
    root, log, log_fd, j = state
    for n in range(1, 8):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    want = _tree(root)
    lines = _lines(log)
    _flip(root, 3, J.HEAD_BYTES + 40)  # the 4th record's payload
    # Its message file never made it to disk, and nor did the files after it.
    for n in (4, 5, 6):
        os.unlink(f"{root}/mail/bob/inbox/20261130T045611.123Z-{n:04d}.md")
    got = replay(root, log)
    assert got.records == 6 and got.files == 2  # 5 and 6 put back; 4 cannot be
    assert _lines(log) == lines  # not one line cut
    (d,) = got.damage
    assert d.segment == "journal-0" and d.messages == ["bob/20261130T045611.123Z-0004"]
    assert d.lost == ["bob/20261130T045611.123Z-0004"] and d.events == [4] and d.in_log
    assert "never written: bob/20261130T045611.123Z-0004" in d.held
    del want["mail/bob/inbox/20261130T045611.123Z-0004.md"]
    assert _tree(root) == want


def test_a_damaged_head_is_skipped_too(state):
    root, log, log_fd, j = state
    for n in range(1, 5):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    _flip(root, 1, 10)  # the 2nd record's seq, in its head
    os.unlink(f"{root}/mail/bob/inbox/20261130T045611.123Z-0003.md")
    got = replay(root, log)
    assert got.records == 3 and got.files == 1
    assert [d.messages for d in got.damage] == [["bob/20261130T045611.123Z-0002"]]
    assert got.damage[0].lost == []  # its file was placed before the crash


def test_log_lines_a_damaged_record_did_not_write_back_become_one_skipped_line(state):
    root, log, log_fd, j = state
    for n in range(1, 4):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    lines = _lines(log)
    _flip(root, 1, J.HEAD_BYTES + 40)
    with open(log, "r+b") as f:  # the 2nd batch's line never reached the disk
        f.seek(len(lines[0]) + 1)
        f.write(bytes(len(lines[1])))
    got = replay(root, log)
    assert not got.damage[0].in_log
    after = _lines(log)
    assert after[0] == lines[0] and after[2] == lines[2] and after[1].strip() == b""
    assert EventLog(log).last_seq == 3


def test_uncommitted_lines_are_cut_and_their_seqs_never_handed_out_again(state):
    root, log, log_fd, j = state
    for n in range(1, 3):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    never = f"{root}/mail/bob/inbox/never.md"  # staged, never placed
    os.write(log_fd, f'{{"seq":3,"kind":"mail/sent","path":"{never}"}}\n'.encode())
    os.write(log_fd, b'{"seq":4,"kind":"x"}\n')
    got = replay(root, log)
    assert got.damage == [] and got.cut_seq == 4
    assert [int(line[7:8]) for line in _lines(log)] == [1, 2]


def test_a_bad_last_record_keeps_its_lines(state):
    """A record whose head is whole but whose payload is damaged may have been
    answered: its lines stay (a torn write without a whole head ends the journal)."""
    root, log, log_fd, j = state
    for n in range(1, 4):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    lines = _lines(log)
    _flip(root, 2, J.HEAD_BYTES + 40)
    got = replay(root, log)
    assert got.records == 2 and got.cut_seq == 0 and len(got.damage) == 1
    assert _lines(log) == lines


def test_leftovers_of_a_checkpointed_segment_are_never_replayed(state):
    """Records older than the newest floor were checkpointed: even if a damaged first
    head lets them be read, they are not put back."""
    root, log, log_fd, j = state
    j.now = (clock := TestClock()).now
    ids = [f"20261130T045611.123Z-{n:04d}" for n in range(5)]
    _deliver(root, log_fd, j, 1, ids[1])
    _deliver(root, log_fd, j, 2, ids[2])
    clock.advance(j.checkpoint_s + 1)
    _deliver(root, log_fd, j, 3, ids[3])  # segment 0 is too old: this goes to segment 1
    assert j.checkpoints == 1  # in place (no `run`): segment 0 dropped, its head zeroed
    _deliver(root, log_fd, j, 4, ids[4])  # its floor: segment 1's first record
    with open(os.path.join(root, "journal-0"), "r+b") as f:
        f.write(b"\x01")  # a stray byte in the zeroed head: the scan reads record 2
    for n in (1, 2):  # removed by hand since
        os.unlink(f"{root}/mail/bob/inbox/{ids[n]}.md")
    got = replay(root, log)
    assert got.records == 2 and got.damage == []
    assert sorted(os.listdir(f"{root}/mail/bob/inbox")) == [f"{ids[3]}.md", f"{ids[4]}.md"]


def test_a_damaged_last_head_whose_files_were_placed_is_damage_not_a_torn_tail(state):
    root, log, log_fd, j = state
    for n in range(1, 4):
        _deliver(root, log_fd, j, n, f"20261130T045611.123Z-{n:04d}")
    lines = _lines(log)
    _flip(root, 2, 0)  # the last record's magic
    got = replay(root, log)
    assert got.records == 2 and got.cut_seq == 0 and _lines(log) == lines
    assert [d.messages for d in got.damage] == [["bob/20261130T045611.123Z-0003"]]
