"""terminal.check_size, the one size rule: spawn refuses what attach caps. End to end:
tests/reliability/test_hostile.py::test_screen_size_is_capped_at_spawn_and_resize."""

import pytest

from bench_wire.errors import WireError
from benchd.runtime.terminal import MAX_COLS, MAX_ROWS, check_size


def test_a_size_in_range_is_kept():
    assert check_size(1, 1) == (1, 1)
    assert check_size(MAX_ROWS, MAX_COLS) == (MAX_ROWS, MAX_COLS)


def test_a_bigger_size_is_refused_unless_capped():
    with pytest.raises(WireError) as exc:
        check_size(MAX_ROWS + 1, 80)
    assert exc.value.code == "bad-request" and f"1-{MAX_ROWS} rows" in exc.value.message
    assert check_size(5000, 5000, cap=True) == (MAX_ROWS, MAX_COLS)


@pytest.mark.parametrize("rows, cols", [(0, 80), (24, 0), (-1, -1)])
@pytest.mark.parametrize("cap", [False, True])
def test_no_size_is_refused_capped_or_not(rows, cols, cap):
    with pytest.raises(WireError) as exc:
        check_size(rows, cols, cap=cap)
    assert exc.value.code == "bad-request"
