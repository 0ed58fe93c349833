"""benchd.store.journal: framing, torn and bad records, replay (idempotent), checkpoints.

Real files in a temporary state dir; a "crash" is the state the files are left in.
"""

import errno
import os
import shutil
import threading

import pytest
import trio

from benchd.store import journal as J
from benchd.store import replay as R
from benchd.store.journal import Append, Journal, Rename, Write
from tests.support.clock import TestClock, still


def _tree(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if not rel.startswith("journal-"):
                with open(path, "rb") as f:
                    out[rel] = f.read()
    return out


def _records(data: bytes) -> list[tuple[int, bytes]]:
    good, _bad = J.read_segment(data)
    return [(r.seq, r.payload) for r in good]


def _segments(root) -> list[list[tuple[int, bytes]]]:
    out = []
    for name in J.SEGMENTS:
        with open(os.path.join(root, name), "rb") as f:
            out.append(_records(f.read()))
    return out


# ---------------------------------------------------------------- framing


def test_entries_round_trip_with_paths_relative_to_the_state_dir(tmp_path):
    root = str(tmp_path)
    entries = [
        Write(f"{root}/mail/bob/inbox/a.md", b"---\nbody\xff", f"{root}/mail/bob/read/a.md"),
        Write(f"{root}/x", b"", ""),
        Rename(f"{root}/mail/bob/inbox/b.md", f"{root}/mail/bob/read/b.md"),
        Append(12345678901, b'{"seq":1}\n'),
    ]
    payload = J.encode_entries(entries, root)
    assert root.encode() not in payload  # relative: a moved state dir still replays
    assert J.decode_entries(payload, root) == entries
    moved = str(tmp_path / "elsewhere")
    assert J.decode_entries(payload, moved)[0].path == f"{moved}/mail/bob/inbox/a.md"


def test_a_garbled_payload_is_a_bad_record():
    with pytest.raises(J.BadRecord):
        J.decode_entries(b"Q", "/r")
    with pytest.raises(J.BadRecord):
        J.decode_entries(b"W\xff\xff\x00\x00abc", "/r")


def _three(seq=7) -> bytes:
    return b"".join(J.frame(seq + i, f"payload {i}".encode()) for i in range(3))


def test_records_are_read_up_to_the_end_of_the_data():
    recs = _records(_three() + bytes(100))
    assert recs == [(7, b"payload 0"), (8, b"payload 1"), (9, b"payload 2")]


@pytest.mark.parametrize("cut", [1, 5, 19, 20, 21])
def test_a_torn_tail_ends_the_segment(cut):
    data = _three()
    assert [s for s, _ in _records(data[:-cut])] == [7, 8]


def test_a_bad_payload_is_skipped_alone():
    data = bytearray(_three())
    second = len(J.frame(7, b"payload 0"))
    data[second + J.HEAD_BYTES + 2] ^= 0xFF  # a byte of the second record's payload
    good, bad = J.read_segment(bytes(data))
    assert [r.seq for r in good] == [7, 9]
    assert [(b.offset, b.seq) for b in bad] == [(second, 8)]


@pytest.mark.parametrize("at", [0, 4, 12, 20, 28, 31])
def test_a_damaged_head_is_skipped_to_the_next_whole_record(at):
    data = bytearray(_three())
    second = len(J.frame(7, b"payload 0"))
    data[second + at] ^= 0x01  # magic, seq, floor, length, crc or the head's own crc
    good, bad = J.read_segment(bytes(data))
    assert [r.seq for r in good] == [7, 9]
    assert len(bad) == 1 and bad[0].offset == second and bad[0].seq is None


def test_a_damaged_first_head_still_reads_the_records_after_it():
    data = bytearray(_three())
    data[5] ^= 0x01
    good, bad = J.read_segment(bytes(data))
    assert [r.seq for r in good] == [8, 9] and bad[0].offset == 0


def test_older_records_of_a_reused_segment_are_not_read_as_new():
    old = _three(seq=100)
    new = J.frame(200, b"payload 0")  # same length as the old first record
    data = new + old[len(new) :]
    assert _records(data) == [(200, b"payload 0")]


def test_a_zeroed_head_makes_the_segment_empty():
    data = bytes(J.HEAD_BYTES) + _three()[J.HEAD_BYTES :]
    assert _records(data) == []


# ---------------------------------------------------------------- the running journal


@pytest.fixture
def state(tmp_path):
    """A state dir with one mailbox and an event log, and an open journal."""
    root = str(tmp_path / "state")
    for sub in ("inbox", "read", "tmp"):
        os.makedirs(f"{root}/mail/bob/{sub}")
    log = f"{root}/events.jsonl"
    log_fd = os.open(log, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    j = Journal(root, lambda: log_fd, segment_bytes=64 * 1024, now=still)
    j.open()
    yield root, log, log_fd, j
    j.close()
    os.close(log_fd)


def _deliver(root, log_fd, j, n, name, retire=False):
    """What the committer does for one message: stage, log, commit, place."""
    inbox, read = f"{root}/mail/bob/inbox/{name}.md", f"{root}/mail/bob/read/{name}.md"
    data = f"---\nid: {name}\n---\n\nbody {n}\n".encode()
    tmp = f"{root}/mail/bob/tmp/{name}.md"
    with open(tmp, "wb") as f:
        f.write(data)
    line = f'{{"seq":{n},"kind":"mail/sent","mail_id":"{name}","path":"{inbox}"}}\n'.encode()
    offset = os.fstat(log_fd).st_size
    os.write(log_fd, line)
    j.commit([Write(inbox, data, read), Append(offset, line)])
    os.rename(tmp, inbox)
    if retire:
        j.commit([Rename(inbox, read)])
        os.rename(inbox, read)


def test_a_commit_is_one_record_and_replay_puts_back_what_was_lost(state):
    root, log, log_fd, j = state
    for n in range(1, 6):
        _deliver(root, log_fd, j, n, f"m{n}", retire=(n == 2))
    want = _tree(root)
    assert sum(len(s) for s in _segments(root)) == 6  # 5 deliveries and 1 retirement
    # A power cut that kept the journal but none of the writes after it: files gone,
    # a rename undone, a file torn, the log cut short (and a stray unanswered line).
    os.unlink(f"{root}/mail/bob/inbox/m1.md")
    os.rename(f"{root}/mail/bob/read/m2.md", f"{root}/mail/bob/inbox/m2.md")
    with open(f"{root}/mail/bob/inbox/m3.md", "r+b") as f:
        f.truncate(3)
    os.unlink(f"{root}/mail/bob/inbox/m4.md")
    with open(log, "r+b") as f:
        f.truncate(20)
    with open(log, "ab") as f:
        f.write(b'{"seq":6,"kind":"never answered"')
    got = R.replay(root, log)
    assert got.records == 6 and got.files == 3 and got.renames == 1 and got.log_bytes > 0
    assert _tree(root) == want
    assert _segments(root) == [[], []]  # dropped: the next start replays nothing
    assert R.replay(root, log).records == 0


def test_replay_twice_is_replay_once(state, tmp_path):
    """A crash during recovery: the segments are still there, so it all happens again,
    to the same end state."""
    root, log, log_fd, j = state
    for n in range(1, 4):
        _deliver(root, log_fd, j, n, f"m{n}", retire=(n == 1))
    want = _tree(root)
    saved = str(tmp_path / "saved")
    os.makedirs(saved)
    for name in J.SEGMENTS:
        shutil.copy(os.path.join(root, name), saved)
    os.unlink(f"{root}/mail/bob/read/m1.md")
    os.unlink(f"{root}/mail/bob/inbox/m2.md")
    os.truncate(log, 0)
    R.replay(root, log)
    once = _tree(root)
    for name in J.SEGMENTS:  # as if the replay crashed before it dropped the segments
        shutil.copy(os.path.join(saved, name), root)
    again = R.replay(root, log)
    assert once == want and _tree(root) == once
    assert again.files == 0 and again.renames == 0 and again.log_bytes == 0
    assert not os.path.exists(os.path.join(root, J.REPLAY_TMP))


def test_replay_does_not_duplicate_a_message_a_later_rename_moved(state):
    root, log, log_fd, j = state
    _deliver(root, log_fd, j, 1, "m1", retire=True)
    R.replay(root, log)
    assert os.listdir(f"{root}/mail/bob/inbox") == []
    assert os.listdir(f"{root}/mail/bob/read") == ["m1.md"]


async def test_a_full_segment_switches_and_the_old_one_is_checkpointed_off_the_loop(state):
    """The old segment is checkpointed in a worker thread of the journal's nursery, and
    a nursery cancelled meanwhile (a stop) still waits for that checkpoint."""
    root, log, log_fd, j = state
    loop, threads = threading.get_ident(), []
    flush = j._flush
    j._flush = lambda seg: (threads.append(threading.get_ident()), flush(seg))[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        n = 0
        while j.active == 0:
            n += 1
            _deliver(root, log_fd, j, n, f"m{n:04d}")
        nursery.cancel_scope.cancel()
    old = j.segments[0]
    assert j.checkpoints == 1 and old.error is None and old.entries == []
    assert threads and loop not in threads
    seg0, seg1 = _segments(root)
    assert seg0 == [] and len(seg1) == 1  # only the record that did not fit is left
    want = _tree(root)
    assert R.replay(root, log).records == 1
    assert _tree(root) == want


async def test_a_checkpoint_that_fails_in_its_thread_is_reported_on_the_loop(state):
    root, log, log_fd, j = state
    loop, reported = threading.get_ident(), []
    j.on_checkpoint_error = lambda err: reported.append((threading.get_ident(), err.errno))
    j.now = (clock := TestClock()).now
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        _deliver(root, log_fd, j, 1, "m1")
        j.log_fd = lambda: 1 << 20  # no such fd: the log's flush fails (EBADF)
        clock.advance(j.checkpoint_s + 1)
        _deliver(root, log_fd, j, 2, "m2")  # segment 0 too old: switch, checkpoint fails
        nursery.cancel_scope.cancel()
    assert reported == [(loop, errno.EBADF)]
    assert j.segments[0].error is not None and len(j.segments[0].entries) == 1  # kept
    j.log_fd = lambda: log_fd
    assert j.close()  # checkpointed at the stop after all


def test_an_old_segment_is_checkpointed_once_its_first_record_is_old(state):
    """Outside a running daemon (no `run`), the checkpoint is done in place."""
    root, log, log_fd, j = state
    j.now = (clock := TestClock()).now
    _deliver(root, log_fd, j, 1, "m1")
    clock.advance(j.checkpoint_s)
    _deliver(root, log_fd, j, 2, "m2")  # not older than checkpoint_s yet: same segment
    assert j.active == 0
    clock.advance(0.001)
    _deliver(root, log_fd, j, 3, "m3")  # finds segment 0 too old: goes to segment 1
    assert j.active == 1
    assert [len(s) for s in _segments(root)] == [0, 1]


def test_a_clean_close_checkpoints_everything(state):
    root, log, log_fd, j = state
    for n in range(1, 4):
        _deliver(root, log_fd, j, n, f"m{n}")
    assert j.close()
    assert _segments(root) == [[], []]
    assert R.replay(root, log).records == 0


def test_without_preallocation_a_segment_grows_and_is_emptied_at_its_checkpoint(tmp_path):
    root = str(tmp_path)
    os.makedirs(f"{root}/mail/bob/inbox")
    os.makedirs(f"{root}/mail/bob/read")
    os.makedirs(f"{root}/mail/bob/tmp")
    log_fd = os.open(f"{root}/events.jsonl", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    j = Journal(root, lambda: log_fd, preallocate=False, segment_bytes=64 * 1024, now=still)
    j.open()
    assert os.path.getsize(f"{root}/journal-0") == 0
    _deliver(root, log_fd, j, 1, "m1")
    assert os.path.getsize(f"{root}/journal-0") == j.segments[0].pos > 0
    os.unlink(f"{root}/mail/bob/inbox/m1.md")
    want_body = b"body 1\n"
    assert R.replay(root, f"{root}/events.jsonl").files == 1
    with open(f"{root}/mail/bob/inbox/m1.md", "rb") as f:
        assert f.read().endswith(want_body)
    assert os.path.getsize(f"{root}/journal-0") == 0
    j.close()
    os.close(log_fd)


def test_a_failed_commit_leaves_no_record_to_replay(state):
    root, log, log_fd, j = state
    _deliver(root, log_fd, j, 1, "m1")
    from benchd.store.fileio import faults

    faults.arm("journal", "EIO", 1)
    try:
        with pytest.raises(OSError):
            j.commit([Append(0, b"never")])
    finally:
        faults.clear()
    _deliver(root, log_fd, j, 2, "m2")  # takes the failed one's place
    assert [len(s) for s in _segments(root)] == [2, 0]


def test_a_disk_too_full_to_preallocate_still_opens_and_commits(tmp_path):
    """A nearly full disk must not stop the start: the segment grows with its records."""
    root = str(tmp_path)
    os.makedirs(f"{root}/mail/bob/tmp")
    os.makedirs(f"{root}/mail/bob/inbox")
    log_fd = os.open(f"{root}/events.jsonl", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    j = Journal(root, lambda: log_fd, now=still)
    from benchd.store.fileio import faults

    faults.arm("journal-prealloc", "ENOSPC", 2)
    try:
        j.open()
    finally:
        faults.clear()
    assert [seg.preallocated for seg in j.segments] == [False, False]
    _deliver(root, log_fd, j, 1, "m1")
    assert j.close()
    assert _segments(root) == [[], []]
    os.close(log_fd)
