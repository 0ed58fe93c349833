"""A mailbox's unread caps hold under concurrency: they are checked where the batch
commits, counting what earlier sends of the same batch add, so concurrent sends never
take a mailbox past them (the tally read before the commit let 64 of 100 sends into 50
free places)."""

from tests.conftest import assert_refused


def concurrent_sends(d, n: int, to: str, body: str) -> list[dict]:
    """`n` sends to `to`, each on its own connection, all written before any answer is
    read: they reach the daemon together and share its batches."""
    clients = [d.connect() for _ in range(n)]
    try:
        for i, c in enumerate(clients):
            c.send({"verb": "mail/send", "to": to, "body": body, "subject": f"n{i}"})
        return [c.recv() for c in clients]
    finally:
        for c in clients:
            c.close()


def unread(d, handle: str) -> tuple[int, int]:
    listing = d.ok("mail", "list", "--handle", handle, "--limit", "500")
    return listing["total"], sum(x["size"] for x in listing["messages"])


def test_100_concurrent_sends_into_50_free_places_accept_exactly_50(make_daemon):
    d = make_daemon("--mailbox-messages", "60")
    for i in range(10):
        d.ok("mail", "send", "bob", "-m", f"before {i}")
    answers = concurrent_sends(d, 100, "bob", "x")
    ok = [a for a in answers if a["ok"]]
    refused = [a for a in answers if not a["ok"]]
    assert len(ok) == 50, len(ok)
    for a in refused:
        assert_refused(a, "mailbox-full")
    assert unread(d, "bob")[0] == 60
    ev = d.wait_event("limit/hit", lambda e: e["code"] == "mailbox-full")
    assert ev["mailbox"] == "bob" and ev["limit"] == 60
    # Reading makes room again, exactly as much as was read.
    d.ok("mail", "read", "--handle", "bob")
    answers = concurrent_sends(d, 5, "bob", "y")
    assert sum(a["ok"] for a in answers) == 1


def test_concurrent_large_sends_never_pass_the_byte_cap(make_daemon):
    cap = 100_000
    d = make_daemon("--mailbox-bytes", str(cap))
    d.ok("mail", "send", "bob", "-m", "z" * 5_000)
    answers = concurrent_sends(d, 40, "bob", "b" * 10_000)
    accepted = sum(a["ok"] for a in answers)
    for a in answers:
        if not a["ok"]:
            assert_refused(a, "mailbox-full")
    count, size = unread(d, "bob")
    assert accepted == 9, accepted  # 5,000 + 9 x 10,000 fits; a tenth would not
    assert size <= cap and count == 10
