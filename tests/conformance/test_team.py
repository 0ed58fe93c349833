"""The team file: `bench up -f bench.toml` with a real daemon, real stand-in agents.

Each test starts the daemon through `bench up -f` (as a user would) and stops it with
`bench down` at the end.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import BENCH, ROOT, STANDIN, Benchd, wait_for

THREE = """\
[daemon]
idle-gate = 0.3
paste-settle = 0.05

[agents.alice]
command = [{py}, {standin}, "--ring", "bob"]
ready = "standin>"

[agents.bob]
command = [{py}, {standin}, "--ring", "carol"]
ready = "standin>"
env = {{ COLOUR = "blue" }}

[agents.carol]
command = [{py}, {standin}, "--ring", "operator"]
ready = "standin>"
"""


def _three() -> str:
    return THREE.format(py=json.dumps(sys.executable), standin=json.dumps(STANDIN))


@pytest.fixture
def team(bench_dir, tmp_path):
    """(the CLI on bench_dir, the path of a team file to write); `bench down` at the end."""
    b = Benchd(bench_dir, [])
    path = tmp_path / "bench.toml"
    yield b, path
    b.bench("down")


def _up(b: Benchd, path, *more: str) -> dict:
    r = b.bench("up", "-f", str(path), "--json", *more)
    assert r.rc == 0, r
    return r.json


def test_up_from_a_file_starts_three_agents_and_ps_shows_them(team):
    b, path = team
    path.write_text(_three())
    a = _up(b, path)
    assert [(r["name"], r["status"]) for r in a["team"]] == [
        ("alice", "started"),
        ("bob", "started"),
        ("carol", "started"),
    ]
    listed = b.ok("ps")["sessions"]
    assert {s["handle"]: s.get("team") for s in listed} == {
        "alice": str(path),
        "bob": str(path),
        "carol": str(path),
    }
    text = b.bench("ps").out
    assert text.splitlines()[0].split()[8] == "TEAM"
    assert all("bench.toml" in line for line in text.splitlines()[1:])
    # A session started by hand is not labelled.
    b.ok("spawn", "--name", "dave", "--", sys.executable, STANDIN)
    dave = next(s for s in b.ok("ps")["sessions"] if s["handle"] == "dave")
    assert "team" not in dave


def test_a_deadline_in_the_file_reaches_the_job(team):
    b, path = team
    path.write_text(
        "[agents.alice]\n"
        f"command = [{json.dumps(sys.executable)}, {json.dumps(STANDIN)}]\n"
        'task = "count to three"\n'
        'deadline = "1h"\n'
        'stall-after = "20m"\n'
    )
    assert [r["status"] for r in _up(b, path)["team"]] == ["started"]
    alice = next(s for s in b.ok("ps")["sessions"] if s["handle"] == "alice")
    assert 0 < alice["deadline_left_ms"] <= 3600 * 1000


def test_up_again_starts_nothing_and_says_what_already_runs(team):
    b, path = team
    path.write_text(_three())
    first = {r["name"]: r for r in _up(b, path)["team"]}
    r = b.bench("up", "-f", str(path))
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0].startswith("benchd already running")
    assert lines[1].startswith("team file ")
    assert [line.split()[:2] for line in lines[2:]] == [
        ["running", "alice"],
        ["running", "bob"],
        ["running", "carol"],
    ]
    again = {x["name"]: x for x in _up(b, path)["team"]}
    assert {n: (x["status"], x["session"]) for n, x in again.items()} == {
        n: ("running", x["session"]) for n, x in first.items()
    }
    assert len([s for s in b.ok("ps")["sessions"]]) == 3


def test_a_missing_agent_is_started_and_a_changed_one_reported_not_replaced(team):
    b, path = team
    path.write_text(_three())
    first = {r["name"]: r for r in _up(b, path)["team"]}
    b.ok("kill", "alice")
    path.write_text(_three().replace('COLOUR = "blue"', 'COLOUR = "red"'))
    r = b.bench("up", "-f", str(path))
    assert r.rc == 0, r
    assert "started  alice" in r.out
    bob_line = next(line for line in r.out.splitlines() if " bob " in line)
    assert bob_line.startswith("changed  bob")
    assert "(env)" in bob_line and "bench kill bob" in bob_line
    # Not replaced: the same session and process still hold the name.
    bob = next(s for s in b.ok("ps")["sessions"] if s["handle"] == "bob")
    assert (bob["session"], bob["pid"]) == (first["bob"]["session"], first["bob"]["pid"])
    a = _up(b, path)
    assert {x["name"]: x["status"] for x in a["team"]} == {
        "alice": "running",
        "bob": "changed",
        "carol": "running",
    }
    assert next(x for x in a["team"] if x["name"] == "bob")["changed"] == ["env"]


BAD = [
    # (file text, line, key, what the message says)
    (
        '[daemon]\nidle-gate = 0.3\n\n[agents.alice]\ncommand = ["x",, "y"]\nready = "a"\n',
        5,
        "agents.alice.command",
        "invalid TOML",
    ),
    ('[agents.alice]\ncommand = "true"\nready = "x\n', 3, "agents.alice.ready", "invalid TOML"),
    ('[agents.alice]\ncommand = "true"\ncolour = "red"\n', 3, "agents.alice.colour", "unknown key"),
    (
        '[agents.alice]\ncommand = "true"\n\n[agents.bob]\ncommand = "true"\nrows = "forty"\n',
        6,
        "agents.bob.rows",
        "must be an integer, not a string",
    ),
    ("[daemon]\nidle-gate = true\n", 2, "daemon.idle-gate", "must be a number, not a boolean"),
    ("[daemon]\nspeed = 3\n", 2, "daemon.speed", "unknown key"),
    (
        '[agents.alice]\ncommand = "true"\ndeadline = "soon"\n',
        3,
        "agents.alice.deadline",
        "is not a duration",
    ),
    ("[agents.alice]\nready = 'x'\n", 1, "agents.alice", "needs a command"),
    (
        '[agents.alice]\ncommand = "true"\nreply-to = ["bob"]\n',
        3,
        "agents.alice.reply-to",
        "needs a task",
    ),
    ('[agent.alice]\ncommand = "true"\n', 1, "agent", "unknown key"),
]


@pytest.mark.parametrize("text,line,key,what", BAD)
def test_a_bad_file_names_the_file_line_and_key(team, text, line, key, what):
    b, path = team
    path.write_text(text)
    r = b.bench("up", "-f", str(path))
    assert r.rc == 2, r
    assert r.err.startswith(f"bench: {path}:{line}: {key}: "), r.err
    assert r.err.rstrip().endswith("[bad-team-file]"), r.err
    assert what in r.err
    assert "Traceback" not in r.err
    # Nothing was started: the file is read before the daemon.
    assert b.bench("status").rc == 3


def test_bench_toml_in_the_current_directory_is_used(team, tmp_path):
    b, path = team
    path.write_text(_three())
    r = subprocess.run(
        [BENCH, "up", "--json"], env=b.env(), cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode == 0, r
    assert [x["status"] for x in json.loads(r.stdout)["team"]] == ["started"] * 3


def test_down_with_the_file_ends_only_its_agents(team):
    b, path = team
    path.write_text(_three())
    _up(b, path)
    b.ok("spawn", "--name", "dave", "--", sys.executable, STANDIN)
    a = b.ok("down", "-f", str(path))
    assert sorted(e["name"] for e in a["ended"]) == ["alice", "bob", "carol"]
    wait_for(
        lambda: [s["handle"] for s in b.ok("ps")["sessions"]] == ["dave"],
        30,
        "only dave running",
    )
    assert b.bench("status").rc == 0  # the daemon still runs


def test_the_ring_runs_from_the_example_file(team):
    b, _path = team
    example = os.path.join(ROOT, "examples", "ring.toml")
    a = _up(b, example)
    assert [x["name"] for x in a["team"]] == ["alice", "bob", "carol"]
    # No wait for the prompts: a wake lands only once the ready pattern shows.
    b.ok("mail", "send", "alice", "-m", "number 100")
    listed = wait_for(
        lambda: b.ok("mail", "list", "--handle", "operator")["messages"], 60, "the ring's end"
    )
    got = b.ok("mail", "read", listed[0]["mail_id"], "--handle", "operator")
    assert (got["from"], got["body"].strip()) == ("carol", "number 103")


def test_a_planted_link_at_the_record_is_not_followed(team, tmp_path):
    # Another process of the user (a hostile agent) links team.json to a file of yours.
    b, path = team
    path.write_text(_three())
    os.makedirs(b.dir, exist_ok=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    os.symlink(victim, os.path.join(b.dir, "team.json"))
    a = _up(b, path)
    assert [x["status"] for x in a["team"]] == ["started"] * 3
    assert victim.read_text() == "mine"
    assert not os.path.islink(os.path.join(b.dir, "team.json"))
    assert all(s.get("team") == str(path) for s in b.ok("ps")["sessions"])


def test_a_record_whose_entry_is_not_a_table_is_reported_changed(team):
    # Another process of the user rewrites team.json: an entry that is a list, not a
    # table. `bench up -f` again says each agent changed (nothing to compare with), and
    # starts or replaces nothing; no traceback.
    b, path = team
    path.write_text(_three())
    first = {r["name"]: r for r in _up(b, path)["team"]}
    record = os.path.join(b.dir, "team.json")
    with open(record) as f:
        doc = json.load(f)
    for rec in doc["sessions"].values():
        rec["entry"] = ["not", "a", "table"]
    with open(record, "w") as f:
        json.dump(doc, f)
    again = {x["name"]: x for x in _up(b, path)["team"]}
    assert {n: (x["status"], x["session"]) for n, x in again.items()} == {
        n: ("changed", x["session"]) for n, x in first.items()
    }
    assert "command" in again["alice"]["changed"]
