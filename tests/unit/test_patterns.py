"""benchd.core.wakegate: session-supplied patterns compiled by RE2 (linear time), or
refused with a clear code."""

import time

import pytest

from bench_wire.errors import WireError
from benchd.core.wakegate import MATCH_CHARS, compile_pattern
from benchd.runtime.sessions import BUILTIN_PRESETS


def test_a_catastrophic_pattern_runs_in_linear_time():
    p = compile_pattern("(a+)+$")
    t0 = time.monotonic()
    assert p.search("a" * 40 + "!") is None
    assert p.search("a" * 100_000 + "!") is None
    assert time.monotonic() - t0 < 5  # a ceiling: backtracking would take years


def test_patterns_are_multi_line_and_see_only_the_end_of_the_text():
    p = compile_pattern("^> $")
    assert p.search("output\n> ") is not None
    assert p.search("> \n" + "x" * MATCH_CHARS) is None  # the prompt scrolled out of reach
    assert compile_pattern("ready").search("x" * 10 * MATCH_CHARS + "ready") is not None


@pytest.mark.parametrize("source", [r"(a)\1", "(?=a)", "(?!a)b", "(?<=a)b", "(?<!a)b"])
def test_backreferences_and_lookaround_are_bad_pattern(source):
    with pytest.raises(WireError) as e:
        compile_pattern(source)
    assert e.value.code == "bad-pattern"
    assert "backreferences or lookaround" in e.value.message


@pytest.mark.parametrize("source", ["([", "a{2,1}", "*"])
def test_what_is_no_regular_expression_is_bad_regex(source):
    with pytest.raises(WireError) as e:
        compile_pattern(source)
    assert e.value.code == "bad-regex"


def test_a_long_pattern_is_refused():
    with pytest.raises(WireError) as e:
        compile_pattern("a" * 1001)
    assert e.value.code == "bad-pattern"


def test_the_presets_patterns_compile():
    for name, preset in BUILTIN_PRESETS.items():
        assert compile_pattern(preset.ready), name


def test_text_that_is_no_valid_unicode_is_still_matched():
    assert compile_pattern("a$").search("x\udc80a") is not None
