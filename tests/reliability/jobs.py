"""Job helpers for the outbox crash tests: spawn jobs over the socket, read replies."""

from __future__ import annotations

from tests.reliability.common import scan_mail
from tests.support.daemon import Benchd


def spawn_job(d: Benchd, name: str, key: str, reply_to: list[str], content: str) -> dict:
    """A job whose child reports `content` and exits 0 (so it settles `completed`)."""
    script = f"bench report '{content}'"
    a = d.call(
        {
            "verb": "session/spawn",
            "argv": ["bash", "-c", script],
            "name": name,
            "job": {"body": f"task for {name}", "key": key, "reply_to": reply_to},
        }
    )
    assert a.get("ok") is True, a
    return a


def reply_header(outcome: str, agent: str, session: str) -> str:
    """The header of a reply from a child that exited with code 0."""
    return (
        f"---\noutcome: {outcome}\nagentId: {agent}\nsessionId: {session}\n"
        "ended: exited\nexitCode: 0\n---\n\n"
    )


def arm(d: Benchd, point: str, err: str, count: int) -> None:
    a = d.call({"verb": "debug/fault", "point": point, "errno": err, "count": count})
    assert a.get("ok") is True, a


def posted_keys(d: Benchd, prefix: str, since: int = 0) -> dict[str, list[str]]:
    """outbox/posted events whose key starts with prefix: key -> mail ids posted."""
    out: dict[str, list[str]] = {}
    for e in d.events(since, "outbox/posted"):
        if e["key"].startswith(prefix):
            out.setdefault(e["key"], []).append(e["mail_id"])
    return out


def barrier(d: Benchd, tag: str) -> None:
    """A later job (key sorting after the others) whose reply is delivered only once the
    outbox has drained past every row written before it."""
    witness = f"witness-{tag}"
    since = d.last_seq()
    spawn_job(d, f"barrier-{tag}", f"zz-barrier-{tag}", [witness], "b")
    d.wait_event("outbox/posted", lambda e: e["to"] == witness, 60, since)


def check_replies(d: Benchd, jobs: dict[str, dict], handles: list[str]) -> None:
    """Exactly one reply per (job, address): right key, sender, header and content."""
    scan = scan_mail(d.dir)
    assert scan.staged == [] and scan.stray == [], (scan.staged, scan.stray)
    replies = {}
    for msg in scan.messages:
        key = msg["meta"]["key"]
        if key.startswith("outbox:"):
            assert key not in replies, f"two replies with key {key}: {msg['path']}"
            replies[key] = msg
    for name, j in jobs.items():
        for i, h in enumerate(handles):
            key = f"outbox:{j['key']}:reply:{i}"
            msg = replies.get(key)
            assert msg is not None, f"no reply {key} for {h}"
            assert msg["meta"]["to"] == h and msg["meta"]["from"] == name, msg["meta"]
            want = reply_header("completed", name, j["session"]) + j["content"]
            assert msg["body"] == want.encode(), (key, msg["body"][:200])
    for h in handles:
        theirs = [m for m in scan.messages if m["meta"]["to"] == h]
        assert len(theirs) == len(jobs), (h, [m["meta"]["key"] for m in theirs])
        a = d.call({"verb": "mail/list", "handle": h, "state": "all", "limit": 1})
        assert a["total"] == len(jobs), (h, a)
