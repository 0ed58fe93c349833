"""One clock: the daemon's timing rules read trio's clock, the one trio.sleep waits on, so
`trio.testing.MockClock` drives a rule's readings and its sleeps together; times kept
on disk come from the injected wall clock (benchd.core.names).

The MockClock tests run the daemon's own objects (the reactor, a mail index, a job's
watch, a real pty) and move time by hand: a one-hour idle gate, a ten-minute stall and
an hour's deadline pass without waiting for them."""

import collections
import os
import signal
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from bench_wire import messages as m
from benchd.core.jobs import Job, JobRecord, Outcome
from benchd.core.names import SYSTEM_WALL, IdClock
from benchd.core.wakegate import digest_line
from benchd.runtime.jobhost import JobHost, JobWatch
from benchd.runtime.mailroom import Mailboxes, Mailroom
from benchd.runtime.reactor import Reactor
from benchd.runtime.roster import Session, Wake
from benchd.runtime.terminal import Terminal
from benchd.store.index import UNREAD, Index
from benchd.store.outbox import JobFiles
from tests.support.clock import TestClock


def test_the_system_wall_clock_reads_the_epoch_in_ms():
    first = SYSTEM_WALL.wall_ms()
    assert first > 1_600_000_000_000  # after 2020: the epoch, in ms
    assert SYSTEM_WALL.wall_ms() >= first


def test_the_test_clock_moves_only_when_told():
    clock = TestClock(now=10.0, wall_ms=5_000)
    assert (clock.now(), clock.wall_ms()) == (10.0, 5_000)
    clock.advance(1.5)
    assert (clock.now(), clock.wall_ms()) == (11.5, 6_500)
    with pytest.raises(ValueError):
        clock.advance(-1)


def _settings(**kw):
    base = dict(idle_gate=1.0, paste_settle=0.0, wake_burst=1, wake_refill=2.0, enter_retries=0)
    return m.ReactorSettings(**{**base, **kw})


def _mail(n):
    return m.MailSent(mail_id=f"m{n}", sender="alice", to="bob", path=f"p{n}", key=f"k{n}")


def test_the_wake_bucket_and_its_digest_timer_follow_trio_time(tmp_path):
    """A capped wake's digest timer sleeps (trio.sleep) until the bucket has a token
    again, then takes it: the bucket's readings and the sleep are one clock, so jumping
    the MockClock past the refill time is all it takes. Two clocks (a monotonic reading
    and trio's sleep) would wake the timer to an empty bucket."""
    clock = trio.testing.MockClock()  # rate 0: time moves only by jump()
    recorded: list[m.Event] = []

    async def record(ev):
        recorded.append(ev)
        return True

    async def run():
        index = Index(str(tmp_path / "index.sqlite"))
        mail_root = str(tmp_path / "mail")
        room = Mailroom(mail_root, index, None, Mailboxes(mail_root), IdClock())
        for n in (2, 3):  # the capped mail, unread in bob's mailbox
            index.add("bob", f"m{n}", UNREAD, "alice", "hi", "date", 10, f"k{n}", new=True)
        bob = Session("s-1", "bob", "tok", ["agent"], None, None, None)
        reactor = Reactor(lambda h: bob if h == "bob" else None, room, record, _settings(), None)
        async with trio.open_nursery() as nursery:
            await nursery.start(reactor.run)
            reactor.on_event(_mail(1))  # the bucket's one token: a wake
            reactor.on_event(_mail(2))  # empty: capped, the digest timer armed
            reactor.on_event(_mail(3))
            await trio.testing.wait_all_tasks_blocked()
            assert [w.mail_id for w in bob.wakes] == ["m1"]
            capped = [e for e in recorded if isinstance(e, m.WakeCapped)]
            assert sorted(e.mail_id for e in capped) == ["m2", "m3"]  # started tasks: any order
            clock.jump(1.9)  # not yet a whole token back (one per 2 s)
            await trio.testing.wait_all_tasks_blocked()
            assert len(bob.wakes) == 1
            clock.jump(0.1)
            await trio.testing.wait_all_tasks_blocked()
            assert [w.digest for w in bob.wakes] == [0, 2]  # one digest for both
            assert not reactor.courier("bob").capped
            nursery.cancel_scope.cancel()
        index.close()

    trio.run(run, clock=clock)


def test_the_idle_gate_waits_on_the_clock_the_terminal_stamps(tmp_path):
    """End to end on a real pty: the terminal stamps its output with trio's clock, the
    reactor's idle gate compares that with trio's clock and sleeps on it, so an hour's
    gate holds the wake until the test jumps an hour, and then the line is typed."""
    gate = 3600.0
    # rate 1: the clock also runs with real time, so the guards below (fail_after) hold
    # while the pty's real I/O is awaited; an hour's gate cannot pass by itself meanwhile.
    clock = trio.testing.MockClock(rate=1.0)
    woken = trio.Event()
    recorded: list[m.Event] = []

    async def record(ev):
        recorded.append(ev)
        if isinstance(ev, m.AgentWoken):
            woken.set()
        return True

    async def run():
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm"}
        term = Terminal(["sh", "-c", "echo ready; exec cat"], str(tmp_path), env, 24, 80, 65536)
        bob = Session("s-1", "bob", "tok", ["agent"], term, None, None)
        reactor = Reactor(
            lambda h: None, None, record, _settings(idle_gate=gate, enter_check=0.0), None
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(term.drain)
                with trio.fail_after(60):
                    while b"ready" not in term.scrollback:
                        await term.changed.wait()
                nursery.start_soon(reactor.run_session, bob)
                bob.queue_wake(Wake(None, None, digest=2))
                await trio.testing.wait_all_tasks_blocked()
                assert not woken.is_set()  # the gate holds: the output is fresh
                quiet_since = term.last_output
                assert quiet_since is not None
                clock.jump(gate)
                with trio.fail_after(60):
                    await woken.wait()
                    assert trio.current_time() - quiet_since >= gate
                    while digest_line(2).encode() not in term.scrollback:
                        await term.changed.wait()  # the line reached the pty
                nursery.cancel_scope.cancel()
        finally:
            term.signal_group(signal.SIGKILL)
            with trio.move_on_after(30):
                await term.wait_exit()  # reaped: no process left behind
            term.close()

    trio.run(run, clock=clock)
    [ev] = [e for e in recorded if isinstance(e, m.AgentWoken)]
    assert (ev.handle, ev.digest) == ("bob", 2)


class _Log:
    def info(self, event, **kw):
        pass

    warning = error = exception = info


def test_a_jobs_stall_and_deadline_follow_trio_time(tmp_path):
    """A job's watch on a real pty: its stall time (10 minutes) and its deadline (an
    hour) are read and slept on trio's clock, as the terminal stamps its output, so the
    MockClock's jumps decide when each fires, and output the child prints ends the
    stall."""
    # rate 1 (real time flows too) keeps the fail_after guards working; the jumps leave
    # a margin of seconds that real time alone could not cover.
    clock = trio.testing.MockClock(rate=1.0)
    recorded: list[m.Event] = []
    seen: collections.defaultdict[str, trio.Event] = collections.defaultdict(trio.Event)
    ended: list[str] = []

    async def record(ev):
        recorded.append(ev)
        seen[type(ev).__name__].set()
        return True

    async def end(s):
        ended.append(s.id)
        seen["ended"].set()

    async def until(what):
        with trio.fail_after(60):
            await seen[what].wait()

    async def run():
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm"}
        term = Terminal(["sh", "-c", "echo working; exec cat"], str(tmp_path), env, 24, 80, 65536)
        job = Job(session="s-1", handle="worker", key="k", sender="operator", reply_to=())
        s = Session("s-1", "worker", "tok", ["agent"], term, None, job)
        files = JobFiles(str(tmp_path))  # the job's record: no task, so no thread
        watch = JobWatch(record, None, None, files, end, _Log(), 600.0, 86400.0, SYSTEM_WALL)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(term.drain)
                with trio.fail_after(60):
                    while b"working" not in term.scrollback:
                        await term.changed.wait()
                watch.prepare(s, m.Spawn(argv=["agent"], deadline=3600.0))
                assert s.deadline_at == pytest.approx(trio.current_time() + 3600.0, abs=1.0)
                nursery.start_soon(watch.run_session, s)
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(570.0)
                await trio.testing.wait_all_tasks_blocked()
                assert recorded == [] and s.stalled_at is None  # quiet, not yet stalled
                clock.jump(30.0)
                await until("JobStalled")
                [stalled] = recorded
                assert stalled.idle_ms >= 600_000 and stalled.mailed == []
                clock.jump(60.0)
                await term.write(b"x")  # the child shows output again (the pty echoes)
                await until("JobActive")
                assert 60_000 <= recorded[-1].stalled_ms < 120_000
                assert not ended
                clock.jump(3600.0)  # past the deadline, an hour after prepare
                await until("JobDeadline")
                await until("ended")
                assert ended == ["s-1"]
                nursery.cancel_scope.cancel()
        finally:
            term.signal_group(signal.SIGKILL)
            with trio.move_on_after(30):
                await term.wait_exit()  # reaped: no process left behind
            term.close()

    trio.run(run, clock=clock)


def test_the_job_host_stamps_and_schedules_by_its_wall_clock(tmp_path):
    clock = TestClock(wall_ms=1_000_000)
    host = JobHost(JobFiles(str(tmp_path)), None, None, None, 65536, 1.0, None, clock)
    child = Session("s-child", "worker", "token", ["worker"])
    caller = SimpleNamespace(handle="operator", session=None)
    host.begin(child, m.JobMailSpec(body="do it", reply_to=["alice"]), caller)
    clock.advance(60)
    op = host.settle_op(child.job, Outcome.COMPLETED, "done", None, False)
    (reply,) = op.change(JobRecord(job=child.job)).replies
    assert reply.due == 1_060_000  # stored, and read back by the next daemon: wall ms
