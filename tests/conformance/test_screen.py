"""session/screen: the daemon's screen model, live, to the operator only."""

import time

from tests.reliability.test_access import run_in_session
from tests.support.refusal import assert_refused


def spawn_red(d, name="painter"):
    # Red text, then `cat`: what is typed is echoed by the pty and shows on the screen.
    a = d.call(
        {
            "verb": "session/spawn",
            "name": name,
            "rows": 10,
            "cols": 40,
            "argv": ["sh", "-c", "printf '\\033[31mred\\033[0m plain\\n'; exec cat"],
        }
    )
    assert a["ok"] is True, a
    return a


def test_screen_once_with_colours(shared, who):
    d = shared
    spawn_red(d, who)

    def frame():
        with d.connect() as c:
            c.send({"verb": "session/screen", "handle": who, "id": 1})
            f, end = c.recv(), c.recv()
        assert f["type"] == "screen" and end["type"] == "end", (f, end)
        return f if f["lines"][0].startswith("red plain") else None

    f = d.wait_until(frame, 20, "the red line on screen")
    assert (f["rows"], f["cols"]) == (10, 40) and len(f["lines"]) == 10
    assert f["styles"][0] == [[0, 3, "red", "default", ""]]
    assert f["styles"][1] == []


def test_screen_follow_sends_changes_and_ends_with_the_session(shared, who):
    d = shared
    spawn_red(d, who)
    with d.connect() as c:
        c.send({"verb": "session/screen", "handle": who, "follow": True, "id": 7})
        first = c.recv()
        assert first["type"] == "screen" and first["id"] == 7
        assert d.call({"verb": "session/type", "handle": who, "text": "hello there"})["ok"]
        deadline = time.monotonic() + 20
        seen = first
        while not any("hello there" in ln for ln in seen["lines"]):
            assert time.monotonic() < deadline, seen
            seen = c.recv()
            assert seen["type"] == "screen", seen
        # A burst of 50 typed lines arrives as a few frames, not fifty.
        for i in range(50):
            assert d.call({"verb": "session/type", "handle": who, "text": f"l{i}"})["ok"]
        frames = 0
        while True:
            f = c.recv()
            assert f["type"] == "screen", f
            frames += 1
            if any("l49" in ln for ln in f["lines"]):
                break
        assert frames < 50, frames
        assert d.call({"verb": "session/kill", "handle": who})["ok"]
        while True:
            f = c.recv()
            if f["type"] == "end":
                break
        assert f["reason"] == "exited"


def test_a_past_sessions_screen_and_output_followed_end_at_once(daemon):
    """A session from an earlier daemon is a past session: its kept output and screen
    are answered, and a follow of either ends at once (nothing of it runs any more)."""
    d = daemon
    a = d.call({"verb": "session/spawn", "name": "gone", "argv": ["sh", "-c", "echo from-before"]})
    assert a["ok"] is True, a
    d.wait_event("session/exited", lambda e: e["session"] == a["session"])
    d.restart()
    with d.connect() as c:
        c.send({"verb": "session/screen", "handle": a["session"], "follow": True, "id": 3})
        f, end = c.recv(), c.recv()
    assert f["type"] == "screen" and any("from-before" in ln for ln in f["lines"]), f
    assert end["type"] == "end" and end["reason"] == "exited" and end["exit"] == 0, end
    with d.connect() as c:
        c.send({"verb": "session/tail", "handle": "gone", "follow": True, "id": 4})
        frames = []
        while not frames or frames[-1]["type"] != "end":
            frames.append(c.recv())
    assert frames[-1]["reason"] == "exited", frames
    assert {f["type"] for f in frames[:-1]} == {"output"}, frames


def test_screen_is_operator_only_and_checks_handles(shared, who, tmp_path):
    d = shared
    spawn_red(d, who)
    rec = run_in_session(
        d, tmp_path, who + "a", [{"verb": "session/screen", "handle": who, "token": "$TOKEN"}]
    )
    (a,) = rec["answers"]
    assert_refused(a, "forbidden")
    a = d.call({"verb": "session/screen", "handle": "nobody-here"})
    assert_refused(a, "no-such-session")
    a = d.call({"verb": "session/screen", "handle": "../x"})
    assert_refused(a, "bad-handle", "no-such-session")


def test_a_line_printed_while_the_first_frame_is_drawn_is_followed(shared, who):
    """A program that prints one line and then only sleeps: the line may arrive while the
    follow's first frame is rendered and sent. It must still reach the follower (the
    daemon takes the output event before it renders, never after)."""
    d = shared
    for i in range(12):
        name = f"{who}once{i}"
        argv = ["sh", "-c", f"echo line-{i}; exec sleep 600"]
        with d.connect() as c:  # the follow asked at once, while the line is on its way
            c.send({"verb": "session/spawn", "name": name, "argv": argv, "id": 1})
            c.send({"verb": "session/screen", "handle": name, "follow": True, "id": 2})
            seen = None
            deadline = time.monotonic() + 20
            while seen is None or not any(f"line-{i}" in ln for ln in seen["lines"]):
                assert time.monotonic() < deadline, (i, seen)
                f = c.recv()  # the client's 30 s socket timeout bounds a frame that never comes
                if f.get("id") == 2:
                    assert f["type"] == "screen", f
                    seen = f
        assert d.call({"verb": "session/kill", "handle": name})["ok"]
