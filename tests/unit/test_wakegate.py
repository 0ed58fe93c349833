"""The wake gate's decisions, fed facts in-process: no pty, no trio, no sleeps."""

import pytest

from benchd.core import wakegate as g


def act(now, last_output, last_input=0.0, shows_ready=None):
    return g.Activity(
        now=now, last_output=last_output, last_input=last_input, shows_ready=shows_ready
    )


def test_nothing_printed_yet_waits_for_output_whatever_the_clock():
    assert g.readiness(1.0, act(1000.0, None)) == g.WaitForOutput()
    assert g.readiness(0.0, act(1000.0, None, shows_ready=True)) == g.WaitForOutput()


def test_recent_output_closes_the_gate_until_it_has_been_quiet_long_enough():
    assert g.readiness(1.0, act(10.0, last_output=9.75)) == g.WaitUntil(10.75)


def test_operator_input_holds_the_gate_like_output():
    assert g.readiness(1.0, act(10.0, last_output=5.0, last_input=9.5)) == g.WaitUntil(10.5)


def test_an_open_gate_asks_to_look_at_the_screen_before_deciding():
    assert g.readiness(1.0, act(10.0, last_output=8.0)) == g.LookAtScreen()


def test_ready_pattern_holding_means_paste():
    assert g.readiness(1.0, act(10.0, last_output=8.0, shows_ready=True)) == g.Ready()


def test_quiet_but_not_ready_waits_for_the_screen_at_least_a_quarter_second():
    assert g.readiness(1.0, act(10.0, 8.0, shows_ready=False)) == g.WaitForScreen(1.0)
    assert g.readiness(0.0, act(10.0, 8.0, shows_ready=False)) == g.WaitForScreen(0.25)


def test_gate_exactly_reached_is_open():
    assert g.readiness(1.0, act(10.0, last_output=9.0, shows_ready=True)) == g.Ready()


def test_idle_for():
    assert g.idle_for(act(10.0, None)) is None
    assert g.idle_for(act(10.0, 7.0, last_input=8.0)) == 2.0


def test_enter_that_takes_effect_is_done_after_one_watch():
    c = g.EnterCheck(retries=3, first_wait=1.0)
    assert c.first() == g.Watch(1.0)
    assert c.seen(changed=True) == g.Done()
    assert c.finished


def test_enter_retried_with_doubling_watches_then_given_up_without_watching_the_last():
    c = g.EnterCheck(retries=3, first_wait=1.0)
    steps = [c.first()]
    while not c.finished:
        step = c.seen(changed=False)
        steps.append(step)
        steps.append(c.retried())
    assert steps == [
        g.Watch(1.0),
        g.RetryEnter(1),
        g.Watch(2.0),
        g.RetryEnter(2),
        g.Watch(4.0),
        g.RetryEnter(3),
        g.GiveUp(),
    ]


def test_a_session_that_ended_counts_as_done():
    c = g.EnterCheck(retries=2, first_wait=0.5)
    c.first()
    assert c.seen(changed=False, ended=True) == g.Done()


def test_no_retries_configured_means_no_check():
    c = g.EnterCheck(retries=0, first_wait=1.0)
    assert c.first() == g.Done()
    with pytest.raises(RuntimeError):
        c.seen(changed=False)


def test_a_finished_check_refuses_more_facts():
    c = g.EnterCheck(retries=1, first_wait=1.0)
    c.first()
    c.seen(changed=True)
    with pytest.raises(RuntimeError):
        c.retried()


def test_negative_settings_are_refused():
    with pytest.raises(ValueError):
        g.EnterCheck(retries=-1, first_wait=1.0)
