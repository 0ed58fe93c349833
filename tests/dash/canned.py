"""A canned Source for the dashboard's snapshot tests: fixed sessions, mail, events, screens.

Snapshots must not change between runs (pids, times, ids would); the pilot tests in
test_pilot.py run the same app against a real daemon, so the wiring is tested for real.
"""

import asyncio

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


class CannedSource:
    dir = "/tmp/bench-demo"

    async def call(self, verb: str, **f) -> dict:
        if verb == "hello":
            return {"caps": {"isolation": "on"}}
        if verb == "session/list":
            return {"sessions": SESSIONS}
        if verb == "mail/list":
            msgs = MAIL.get(f.get("handle"), [])
            if f.get("limit") == 1:
                return {"messages": msgs[:1], "total": UNREAD.get(f.get("handle"), 0)}
            return {"messages": msgs, "total": len(msgs)}
        if verb == "mail/thread":
            thread = [
                dict(m, handle="alice", body=f"body of {m['subject']}\nsecond line")
                for m in MAIL["alice"]
                if f["mail_id"] in (m["mail_id"], m["in_reply_to"]) or m["mail_id"] == f["mail_id"]
            ]
            return {"messages": thread}
        raise WireError("unknown-verb", verb)

    async def stream(self, verb: str, **f):
        if verb == "events":
            if not f.get("follow"):
                for ev in EVENTS:
                    yield {"type": "event", "event": ev}
                return
        elif verb == "session/screen":
            yield _screen(f["handle"])
        await asyncio.Event().wait()  # a follow stream stays open

    def attach_argv(self, handle: str) -> list[str]:
        return ["true"]
