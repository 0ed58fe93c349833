"""The injected clock: the reactor's wake buckets and the job host's times follow a
test clock, so these tests move time instead of waiting for it."""

import json
from types import SimpleNamespace

import pytest

from bench_wire import messages as m
from benchd.core.clock import SystemClock, TestClock
from benchd.core.jobs import Outcome
from benchd.runtime.jobhost import JobHost
from benchd.runtime.reactor import Reactor
from benchd.store.outbox import SqliteOutbox


def test_the_test_clock_moves_only_when_told():
    clock = TestClock(now=10.0, wall_ms=5_000)
    assert (clock.now(), clock.wall_ms()) == (10.0, 5_000)
    clock.advance(1.5)
    assert (clock.now(), clock.wall_ms()) == (11.5, 6_500)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_the_system_clock_reads_both_clocks():
    clock = SystemClock()
    assert clock.now() <= clock.now()
    assert clock.wall_ms() > 1_600_000_000_000  # after 2020: the epoch, in ms


class _Nursery:
    def __init__(self):
        self.started = []

    def start_soon(self, fn, *args):
        self.started.append((fn, args))


def _reactor(clock, burst=1, refill=2.0):
    session = SimpleNamespace(id="s-1", handle="bob", wakes=[], poke=lambda: None)
    settings = m.ReactorSettings(
        idle_gate=1.0,
        paste_settle=0.1,
        wake_burst=burst,
        wake_refill=refill,
        enter_retries=0,
    )
    reactor = Reactor(lambda h: session if h == "bob" else None, None, None, settings, None, clock)
    reactor.nursery = _Nursery()
    return reactor, session


def _mail(n):
    return m.MailSent(mail_id=f"m{n}", sender="alice", to="bob", path=f"p{n}", key=f"k{n}")


def test_the_wake_bucket_refills_as_the_clock_moves():
    clock = TestClock()
    reactor, session = _reactor(clock, burst=1, refill=2.0)
    reactor.on_event(_mail(1))
    reactor.on_event(_mail(2))  # the bucket is empty: capped, no wake
    assert [w.mail_id for w in session.wakes] == ["m1"]
    assert list(reactor.courier("bob").capped) == ["m2"]
    clock.advance(1.9)  # not yet a whole token back
    reactor.on_event(_mail(3))
    assert [w.mail_id for w in session.wakes] == ["m1"]
    clock.advance(0.1)
    reactor.on_event(_mail(4))
    assert [w.mail_id for w in session.wakes] == ["m1", "m4"]


def test_the_job_host_stamps_and_schedules_by_its_clock(tmp_path):
    clock = TestClock(wall_ms=1_000_000)
    outbox = SqliteOutbox(str(tmp_path / "outbox.sqlite"))
    host = JobHost(outbox, lambda h: None, None, None, None, 65536, 1.0, None, clock)
    child = SimpleNamespace(id="s-child", handle="worker", job=None, deadline_ms=None)
    caller = SimpleNamespace(handle="operator", session=None)
    spec = m.JobMailSpec(body="do it", reply_to=["alice"])
    host.begin(child, spec, caller)
    task = json.loads(json.dumps(child.job.to_json()))["payload"]["mail"]
    assert task["createdAt"] == 1_000_000
    clock.advance(60)
    assert host.fanout.fan_out(child.job, Outcome.COMPLETED, "done") == 1
    [(_key, row)] = outbox.list(10, None)
    assert json.loads(row)["due"] == 1_060_000
    outbox.close()
