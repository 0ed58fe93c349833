"""benchd.store.eventlog: appends, torn-tail recovery, and read_since by byte offset."""

import json
import os
from itertools import islice

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench_wire import messages as m
from benchd.runtime.committer import encode_event
from benchd.store.eventlog import EventLog, offset_of


def line(seq: int, pad: int = 0) -> bytes:
    rec = {"seq": seq, "ts": 1_700_000_000_000 + seq, "kind": "mail/sent", "pad": "x" * pad}
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def append(log: EventLog, seqs, pad=lambda s: (s * 37) % 90) -> None:
    log.write([line(s, pad(s)) for s in seqs])
    log.last_seq = max(seqs)


def linear(path: str, since: int) -> list[int]:
    out = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("seq"), int) and obj["seq"] > since:
                out.append(obj["seq"])
    return out


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "events.jsonl")


def test_new_log_is_empty(path):
    log = EventLog(path)
    assert log.last_seq == 0 and log.torn is False
    assert list(log.read_since(0)) == []
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
    log.close()


def test_append_and_reopen(path):
    log = EventLog(path)
    append(log, [1, 2, 3])
    append(log, [4])
    assert [e["seq"] for e in log.read_since(0)] == [1, 2, 3, 4]
    log.close()
    log = EventLog(path)
    assert log.last_seq == 4 and log.torn is False
    log.close()


def test_append_nothing_writes_nothing(path):
    log = EventLog(path)
    log.write([])
    assert os.path.getsize(path) == 0
    log.close()


def test_the_daemons_own_event_encoding_is_searchable(path):
    # Lines encoded by benchd.runtime.committer's own encoder.
    log = EventLog(path)
    lines = []
    for s in range(1, 30):
        ev = m.MailSent(mail_id=f"id{s}", sender="operator", to="bob", path="/p", key="k")
        lines.append(encode_event(ev, s, 1000 + s)[0])
    log.write(lines)
    for since in range(0, 31):
        assert [e["seq"] for e in log.read_since(since)] == list(range(since + 1, 30))
    log.close()


@pytest.mark.parametrize(
    "fragment",
    [b'{"seq": 99', b'{"seq":5', b'{"seq":5,"ts":1,"ki', b"{", b'{"seq":6,"ts":1,"kind":"x"'],
)
def test_torn_tail_is_recovered(path, fragment):
    log = EventLog(path)
    append(log, [1, 2, 3, 4, 5])
    log.close()
    with open(path, "ab") as f:
        f.write(fragment)
    log = EventLog(path)
    assert log.torn is True
    assert log.last_seq == 5  # from the last full line, never from the fragment
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(fragment + b"\n")  # never rewritten: a newline is added
    append(log, [6, 7])
    assert [e["seq"] for e in log.read_since(0)] == [1, 2, 3, 4, 5, 6, 7]
    assert [e["seq"] for e in log.read_since(5)] == [6, 7]
    log.close()
    log = EventLog(path)
    assert log.last_seq == 7 and log.torn is False
    log.close()


def test_torn_tail_only(path):
    with open(path, "wb") as f:
        f.write(b'{"seq":1,"ts"')
    log = EventLog(path)
    assert log.last_seq == 0 and log.torn
    append(log, [1])
    assert [e["seq"] for e in log.read_since(0)] == [1]
    log.close()


def test_last_seq_beyond_the_tail_window(path):
    # A last line longer than the 64 KiB tail read: found by the full scan.
    log = EventLog(path)
    append(log, list(range(1, 10)))
    log.write([line(10, 70_000)])
    log.close()
    log = EventLog(path)
    assert log.last_seq == 10
    log.close()


def test_read_since_limit(path):
    log = EventLog(path)
    append(log, list(range(1, 21)))
    assert [e["seq"] for e in islice(log.read_since(3), 4)] == [4, 5, 6, 7]
    log.close()


def test_read_since_stops_at_the_published_seq(path):
    # Lines of a batch still being flushed are in the file but not yet published:
    # readers of the log must not see them before the live stream does.
    log = EventLog(path)
    append(log, list(range(1, 11)))
    assert log.published_seq == 0  # nothing was published by a committer here
    assert [e["seq"] for e in log.read_since(2, upto=6)] == [3, 4, 5, 6]
    assert [e["seq"] for e in log.read_since(0, upto=0)] == []
    log.close()
    assert EventLog(path).published_seq == 10  # at open, everything on disk is published


def test_read_since_stops_at_an_unfinished_line(path):
    log = EventLog(path)
    append(log, [1, 2])
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"ts":1,"kind":"x"}')  # an append in flight
    assert [e["seq"] for e in log.read_since(0)] == [1, 2]
    assert list(log.read_since(2)) == []
    log.close()


def exact_start(data: bytes, since: int) -> int:
    """Byte offset of the first line with seq > since (by a linear scan)."""
    pos = 0
    for raw in data.splitlines(keepends=True):
        try:
            if json.loads(raw)["seq"] > since:
                return pos
        except ValueError:
            pass
        pos += len(raw)
    return pos


def test_offsets_are_line_starts_and_never_past_the_answer(path):
    log = EventLog(path)
    append(log, list(range(1, 2001)))
    with open(path, "rb") as f:
        data = f.read()
    for since in (0, 1, 50, 999, 1500, 1999, 2000, 5000):
        off = offset_of(log.fd, since)
        assert off == 0 or data[off - 1 : off] == b"\n"
        assert off <= exact_start(data, since)
    log.close()


def test_offset_search_is_not_a_scan_for_the_daemons_encoding(path):
    """`--since` costs O(log size): the search lands near the answer, not at 0.

    Lines encoded the way benchd.runtime.committer encodes events.
    """
    log = EventLog(path)
    lines = []
    for s in range(1, 3001):
        ev = m.MailSent(mail_id=f"id{s}", sender="operator", to="bob", path="/p" * 20, key="k")
        lines.append(encode_event(ev, s, 1000 + s)[0])
    log.write(lines)
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) > 200_000
    for since in (1000, 2500, 2999):
        exact = exact_start(data, since)
        off = offset_of(log.fd, since)
        assert off <= exact
        assert exact - off <= 16 * 1024, (since, off, exact)
    log.close()


def build(path: str, n: int, torn_after: list[int], fragments: list[bytes], pad) -> None:
    """A log of seqs 1..n with a torn fragment (then a recovery reopen) after some seqs."""
    log = EventLog(path)
    seq = 0
    for cut, frag in zip(torn_after + [n], fragments + [None], strict=False):
        if cut > seq:
            append(log, list(range(seq + 1, cut + 1)), pad)
            seq = cut
        if frag is not None:
            log.close()
            with open(path, "ab") as f:
                f.write(frag)
            log = EventLog(path)
            assert log.last_seq == seq
    log.close()


def check_all_since(path: str, n: int) -> None:
    log = EventLog(path)
    try:
        for since in range(0, n + 3):
            got = [e["seq"] for e in log.read_since(since)]
            assert got == linear(path, since), since
            assert got == list(range(since + 1, n + 1)), since
    finally:
        log.close()


def test_read_since_matches_a_linear_scan(path):
    build(path, 300, [], [], pad=lambda s: (s * 7919) % 200)
    check_all_since(path, 300)


def test_read_since_with_torn_lines_in_the_middle(path):
    build(
        path,
        200,
        [40, 41, 120],
        [b'{"seq":41,"ts":17', b'{"seq":4', b'{"se'],
        pad=lambda s: (s * 31) % 150,
    )
    check_all_since(path, 200)


@pytest.mark.parametrize("fragment", [b'{"seq":1', b'{"seq":12', b'{"seq":126', b'{"seq":'])
def test_read_since_with_a_torn_line_ending_the_log(path, fragment):
    # The daemon crashed again right after the recovery added the newline: the torn
    # fragment is the log's last line, and its seq prefix is cut short.
    build(path, 125, [125], [fragment], pad=lambda s: s % 3)
    check_all_since(path, 125)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(min_value=1, max_value=120),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=4),
    keep=st.lists(st.integers(min_value=1, max_value=60), min_size=4, max_size=4),
    pads=st.integers(min_value=1, max_value=500),
)
def test_read_since_property(tmp_path_factory, n, cuts, keep, pads):
    """Torn lines are what a crash leaves: a prefix of the line that was being written."""
    path = str(tmp_path_factory.mktemp("ev") / "events.jsonl")
    cuts = sorted({min(c, n) for c in cuts})
    pad = lambda s: (s * pads) % 173  # noqa: E731
    frags = []
    for c, k in zip(cuts, keep, strict=False):
        whole = line(c + 1, pad(c + 1))
        frags.append(whole[: min(k, len(whole) - 2)])
    build(path, n, cuts, frags, pad=pad)
    check_all_since(path, n)


@pytest.mark.parametrize("fragment", [b'{"seq":5', b'{"seq":1', b'{"seq":51'])
def test_long_lines_and_a_torn_line_ending_the_log(path, fragment):
    # Lines longer than the search's scan window, and a torn prefix of line 51 whose
    # seq digits are cut short as the log's last line.
    build(path, 50, [50], [fragment], pad=lambda s: 5000 + s)
    check_all_since(path, 50)


def test_rotation_keeps_the_file_before_and_reads_across_it(path):
    log = EventLog(path, max_bytes=64 * 1024)
    seq = 0
    for _ in range(3):
        batch = list(range(seq + 1, seq + 301))
        append(log, batch, pad=lambda s: 300)
        seq = batch[-1]
        assert log.due()
        dropped, kept_from = log.rotate()
        assert not log.due() and os.path.getsize(path) == 0
    # Three rotations: the first two files are gone, the third is events.1.jsonl.
    assert (dropped, kept_from) == (600, 601)
    append(log, [901, 902])
    assert [e["seq"] for e in log.read_since(0)] == [*range(601, 901), 901, 902]
    assert [e["seq"] for e in log.read_since(899)] == [900, 901, 902]
    assert [e["seq"] for e in log.read_since(900)] == [901, 902]
    assert [e["seq"] for e in islice(log.read_since(0), 2)] == [601, 602]
    assert [e["seq"] for e in log.read_since(700, upto=702)] == [701, 702]
    log.close()
    # A start right after a rotation (an empty events.jsonl) goes on from the seqs of
    # the rotated file; so does one where the crash came between the two renames.
    log = EventLog(path)
    assert log.last_seq == 902
    log.rotate()
    log.close()
    os.unlink(path)
    log = EventLog(path)
    assert log.last_seq == 902 and [e["seq"] for e in log.read_since(0)][-1] == 902
    log.close()


def test_no_bound_never_rotates(path):
    log = EventLog(path)
    append(log, list(range(1, 400)), pad=lambda s: 300)
    assert not log.due()
    log.close()
