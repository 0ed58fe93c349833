"""The bounded broadcast (terminal output and event followers) and the hub's typed
listeners, in-process. The real wiring is covered end to end by the `events -f`,
`tail -f` and `attach` conformance tests (slow-consumer included)."""

import trio

from bench_wire import messages as m
from benchd.runtime.committer import encode_event
from benchd.runtime.hub import Broadcast, Hub


def drained(sub) -> list:
    out = []
    while True:
        try:
            out.append(sub.receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return out


async def test_every_subscriber_gets_every_item_in_order():
    b: Broadcast[int] = Broadcast()
    one, two = b.subscribe(8), b.subscribe(8)
    for i in range(5):
        b.offer(i)
    assert drained(one) == drained(two) == [0, 1, 2, 3, 4]


async def test_a_full_subscriber_is_dropped_and_the_others_go_on():
    b: Broadcast[int] = Broadcast()
    slow, fast = b.subscribe(2), b.subscribe(16)
    for i in range(5):
        b.offer(i)
    assert slow.overflowed and slow not in b.subscribers
    assert drained(slow) == [0, 1]  # what was queued, then the end of the stream
    assert not fast.overflowed and drained(fast) == [0, 1, 2, 3, 4]


async def test_wants_filters_and_close_ends_every_stream():
    b: Broadcast[int] = Broadcast()
    even = b.subscribe(8, lambda i: i % 2 == 0)
    for i in range(6):
        b.offer(i)
    b.close()
    assert b.subscribers == set() and not even.overflowed
    assert [i async for i in even.receive] == [0, 2, 4]


async def test_hub_hands_listeners_typed_events_and_followers_the_records():
    hub = Hub()
    heard: list[m.Event] = []
    hub.listeners.append(heard.append)
    sent_only = hub.follow("mail/sent")
    everything = hub.follow(None)
    events = [
        m.MailSent(mail_id="m1", sender="alice", to="bob", path="/p", key="k", live=True),
        m.AgentWoken(session="s1", handle="bob", mail_id="m1", sender="alice", path="/p"),
    ]
    encoded = [encode_event(ev, seq, 1) for seq, ev in enumerate(events, 1)]
    records, logged = [e[1] for e in encoded], [e[2] for e in encoded]
    assert [(ev.seq, ev.ts) for ev in events] == [(0, 0), (0, 0)]  # stamped on copies only
    hub.publish(records, logged)
    assert heard == logged  # typed, equal field for field (seq and ts included)
    assert [(ev.seq, ev.ts) for ev in heard] == [(1, 1), (2, 1)]
    assert isinstance(heard[0], m.MailSent) and heard[0].sender == "alice"
    assert drained(sent_only) == records[:1]
    assert drained(everything) == records
