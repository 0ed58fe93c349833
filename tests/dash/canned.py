"""A canned Source for the dashboard's snapshot tests: fixed sessions, mail, events, screens.

Snapshots must not change between runs (pids, times, ids would); the pilot tests in
test_pilot.py run the same app against a real daemon, so the wiring is tested for real.
"""

import asyncio

import msgspec

from bench_wire import messages as m
from bench_wire.errors import WireError

T0 = 1796036400000  # 2026-12-01T11:00:00Z, in ms


def _id(n: int) -> str:
    return f"20261130T1220{n:02d}.000Z-0001"


SESSIONS = [
    {
        "session": "s1a2b3c4d",
        "handle": "alice",
        "pid": 4101,
        "state": "running",
        "idle_ms": 42000,
        "argv": ["claude"],
        "job": False,
    },
    {
        "session": "s2b3c4d5e",
        "handle": "bob",
        "pid": 4102,
        "state": "running",
        "idle_ms": 1000,
        "argv": ["codex"],
        "job": False,
    },
    {
        "session": "s3c4d5e6f",
        "handle": "carol",
        "pid": 4103,
        "state": "running",
        "idle_ms": 7000,
        "argv": ["pi"],
        "job": True,
        "reply_to": ["alice"],
    },
    {
        "session": "s4d5e6f70",
        "handle": "fixer",
        "pid": 4104,
        "state": "exited",
        "idle_ms": None,
        "exit": 0,
        "argv": ["claude"],
        "job": True,
        "reply_to": ["operator", "bob"],
    },
]
UNREAD = {"alice": 2, "bob": 0, "carol": 1, "fixer": 0}
MAIL = {
    "alice": [
        {
            "mail_id": _id(1),
            "from": "operator",
            "subject": "review the patch",
            "date": "",
            "state": "read",
            "size": 120,
            "in_reply_to": None,
        },
        {
            "mail_id": _id(3),
            "from": "bob",
            "subject": "Re: review the patch",
            "date": "",
            "state": "unread",
            "size": 80,
            "in_reply_to": _id(1),
        },
        {
            "mail_id": _id(5),
            "from": "carol",
            "subject": "flaky test in io",
            "date": "",
            "state": "unread",
            "size": 300,
            "in_reply_to": None,
        },
    ],
}
EVENTS = [
    {"seq": 1, "ts": T0, "kind": "daemon/started", "pid": 4000, "version": "0.1.0"},
    {
        "seq": 2,
        "ts": T0 + 1000,
        "kind": "session/spawned",
        "session": "s1a2b3c4d",
        "handle": "alice",
        "pid": 4101,
        "argv": ["claude"],
    },
    {
        "seq": 3,
        "ts": T0 + 2000,
        "kind": "mail/sent",
        "mail_id": _id(3),
        "from": "bob",
        "to": "alice",
        "path": "mail/alice/inbox/x.md",
        "key": "k1",
        "live": True,
    },
    {
        "seq": 4,
        "ts": T0 + 4000,
        "kind": "agent/woken",
        "session": "s3c4d5e6f",
        "handle": "carol",
        "mail_id": _id(4),
        "path": "mail/carol/read/y.md",
        "from": "bob",
    },
    {
        "seq": 5,
        "ts": T0 + 5000,
        "kind": "job/settled",
        "session": "s4d5e6f70",
        "handle": "fixer",
        "key": "job-s4",
        "outcome": "completed",
        "replies": 1,
    },
]


def _screen(handle: str) -> dict:
    lines = [
        f"standin agent {handle}",
        "",
        "You have mail from bob: mail/alice/read/x.md",
        "ok: reviewing",
        "standin> ",
    ]
    styles = [
        [[0, 7, "green", "default", "b"]],
        [],
        [[0, 44, "yellow", "default", ""]],
        [],
        [[0, 8, "cyan", "default", ""]],
    ]
    return {
        "type": "screen",
        "lines": lines,
        "styles": styles,
        "cursor_row": 4,
        "cursor_col": 9,
        "rows": 5,
        "cols": 80,
    }


def _hello() -> m.HelloOk:
    caps = m.Caps(
        frame_bytes=1 << 21,
        body_bytes=1 << 18,
        subject_chars=200,
        list_cap=50,
        list_max=500,
        connections=256,
        scrollback_bytes=1 << 20,
        isolation="on",
    )
    reactor = m.ReactorSettings(
        idle_gate=2.0, paste_settle=0.2, wake_burst=6, wake_refill=60.0, enter_retries=3
    )
    return m.HelloOk(
        version="0.1.0",
        protocol=m.PROTOCOL_VERSION,
        pid=4000,
        bench_dir=CannedSource.dir,
        caller="operator",
        caps=caps,
        reactor=reactor,
        last_seq=EVENTS[-1]["seq"],
    )


class CannedSource:
    """The dashboard's Source, answering from the tables above with the typed answers
    the real one gets."""

    dir = "/tmp/bench-demo"

    async def call(self, req: m.Request) -> m.Response:
        if isinstance(req, m.Hello):
            return _hello()
        if isinstance(req, m.SessionList):
            return msgspec.convert({"sessions": SESSIONS}, m.SessionListOk)
        if isinstance(req, m.MailList):
            msgs = MAIL.get(req.handle or "", [])
            total = UNREAD.get(req.handle or "", 0) if req.limit == 1 else len(msgs)
            shown = msgs[:1] if req.limit == 1 else msgs
            return msgspec.convert(
                {
                    "handle": req.handle,
                    "messages": shown,
                    "total": total,
                    "cap": 50,
                    "truncated": False,
                },
                m.ListOk,
            )
        if isinstance(req, m.MailThread):
            thread = [
                dict(
                    x,
                    handle="alice",
                    path="",
                    body=f"body of {x['subject']}\nsecond line",
                )
                for x in MAIL["alice"]
                if req.mail_id in (x["mail_id"], x["in_reply_to"])
            ]
            return msgspec.convert({"mail_id": req.mail_id, "messages": thread}, m.ThreadOk)
        raise WireError("unknown-verb", req.__struct_config__.tag)

    async def stream(self, req: m.Request):
        if isinstance(req, m.EventsRead):
            if not req.follow:
                for ev in EVENTS:
                    yield m.EventFrame(event=ev)
                return
        elif isinstance(req, m.SessionScreen):
            yield msgspec.convert(_screen(req.handle), m.ScreenFrame)
        await asyncio.Event().wait()  # a follow stream stays open

    def attach_argv(self, handle: str) -> list[str]:
        return ["true"]
