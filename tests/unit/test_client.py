"""The CLI's fast path and its client stays in lockstep with the msgspec types and the click CLI.

- bench_wire.client's JSON agrees with the json module;
- every request bench_cli.entry builds decodes with the daemon's msgspec request decoder
  into the Struct it stands for, field for field;
- the msgspec responses, decoded by the client, carry what bench_cli.output prints;
- bench_cli.entry.parse gives the options click would give, or None (click's turn).
"""

import io
import json

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from bench_cli import entry, output
from bench_wire import client
from bench_wire import messages as m
from bench_wire.messages import request_decoder

# ---------------------------------------------------------------- dumps / loads

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | text
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(text, inner, max_size=5),
    max_leaves=25,
)


@pytest.mark.parametrize(
    "obj",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63,
        "",
        'a"b\\c',
        "\n\r\t\b\f\x00\x1f\x7f",
        "é✓😀",
        "\u2028\u2029",
        "</script>",
        {"a": [1, {"b": None}], "": {}},
        [],
        {},
        [[[]]],
        {"verb": "mail/send", "to": "bob", "body": 'line\n---\n"q"\n', "reply_to": ["x", "y"]},
    ],
)
def test_dumps_loads_examples(obj):
    s = client.dumps(obj)
    assert json.loads(s) == obj
    assert client.loads(s) == obj
    assert client.loads(json.dumps(obj)) == obj
    assert s == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=400)
@given(plain)
def test_dumps_loads_agree_with_json(obj):
    s = client.dumps(obj)
    assert s == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(s) == obj
    assert client.loads(s) == obj
    assert client.loads(json.dumps(obj, ensure_ascii=True, indent=1)) == obj


def test_dumps_tuples_floats_and_refusals():
    assert client.dumps((1, "a")) == '[1,"a"]'
    assert client.dumps([1.5, -0.0, 1e300]) == json.dumps([1.5, -0.0, 1e300], separators=(",", ":"))
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            client.dumps({"x": bad})
    with pytest.raises(TypeError):
        client.dumps({"a": object()})
    with pytest.raises(TypeError):
        client.dumps(b"bytes")


@pytest.mark.parametrize(
    "bad", ["", "{", '{"a":1} x', "NaN", "[1,]", "{'a':1}", '"a\nb"', "Infinity"]
)
def test_loads_refuses_what_is_not_strict_json(bad):
    # ValueError (not StopIteration or anything else): client.Client.recv turns a
    # ValueError into a clean `protocol` error; anything else escapes as a traceback.
    with pytest.raises(ValueError):
        client.loads(bad)


def test_loads_allows_trailing_whitespace():
    assert client.loads('{"a": [1, 2]} \n') == {"a": [1, 2]}


# ---------------------------------------------------------------- requests in lockstep


class FakeConn:
    """Records the request a fast-path command builds; answers like the daemon would."""

    def __init__(self, answer):
        self.answer = answer
        self.reqs: list[dict] = []

    def call(self, req: dict) -> dict:
        self.reqs.append(req)
        answer = HELLO_OK if req["verb"] == "hello" else self.answer
        return client.loads(msgspec.json.encode(answer).decode())


def wire(req: dict, rid: int = 1) -> bytes:
    """The exact bytes client.Client.send writes for a request (without the newline)."""
    req = dict(req)
    req.setdefault("id", rid)
    return client.dumps(req).encode("utf-8", "surrogatepass")


# The caps a send is checked against (big: the property tests build requests of any size;
# refusals against real caps are tested end to end in tests/reliability/test_hostile.py).
HELLO_OK = m.HelloOk(
    id=1,
    version="0",
    protocol=m.PROTOCOL_VERSION,
    pid=1,
    bench_dir="/d",
    caller="operator",
    caps=m.Caps(
        frame_bytes=1 << 30,
        body_bytes=1 << 28,
        subject_chars=1 << 20,
        list_cap=50,
        list_max=500,
        connections=256,
        scrollback_bytes=1 << 20,
    ),
    reactor=m.ReactorSettings(
        idle_gate=2.0, paste_settle=0.2, wake_burst=6, wake_refill=60.0, enter_retries=3
    ),
    sessions=0,
    mailboxes=0,
    test_hooks=False,
    verbs=sorted(m.VERBS),
)

SEND_OK = m.SendOk(
    id=1,
    mail_id="20261130T045611.123Z-0001",
    path="/d/mail/bob/inbox/x.md",
    to="bob",
    key="k",
    live=False,
    note="no-live-session",
)
LIST_OK = m.ListOk(
    id=1,
    handle="bob",
    total=1,
    cap=50,
    truncated=False,
    messages=[
        m.MessageMeta(
            mail_id="20261130T045611.123Z-0001",
            sender="operator",
            subject="s",
            date="2026-11-30T04:56:11.123Z",
            state="unread",
            size=3,
        )
    ],
)
READ_OK = m.ReadOk(
    id=1,
    mail_id="20261130T045611.123Z-0001",
    sender="operator",
    to="bob",
    subject="s",
    date="2026-11-30T04:56:11.123Z",
    body="hi",
    path="/d/mail/bob/read/x.md",
    key="k",
    retired=True,
)
REPORT_OK = m.ReportOk(id=1, session="s1", bytes=5)

handles = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,12}", fullmatch=True)
maybe = lambda s: st.none() | s  # noqa: E731
# What an environment variable can hold (no NUL).
env_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)


@pytest.fixture(autouse=True)
def _no_token(monkeypatch):
    monkeypatch.delenv("BENCH_TOKEN", raising=False)


def run_hot(cmd, opts, answer, capsys=None, stdin=None, monkeypatch=None):
    conn = FakeConn(answer)
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    rc = entry.COMMANDS[cmd](conn, opts, True)
    assert rc == 0
    reqs = [r for r in conn.reqs if r["verb"] != "hello"]  # mail send asks for the caps first
    assert len(reqs) == 1
    return reqs[0]


@settings(max_examples=150)
@given(
    to=handles,
    body=text,
    subject=maybe(text),
    key=maybe(text),
    reply_to=st.lists(handles, max_size=3),
    in_reply_to=maybe(text),
    token=maybe(env_text),
)
def test_mail_send_request_is_a_MailSend(to, body, subject, key, reply_to, in_reply_to, token):
    with pytest.MonkeyPatch.context() as mp:
        if token:
            mp.setenv("BENCH_TOKEN", token)
        req = run_hot(
            ("mail", "send"),
            {
                "to": to,
                "body": body,
                "subject": subject,
                "key": key,
                "reply_to": reply_to,
                "in_reply_to": in_reply_to,
            },
            SEND_OK,
        )
    got = request_decoder.decode(wire(req, 7))
    want = m.MailSend(
        id=7,
        to=to,
        body=body,
        subject=subject or "",
        key=key,
        reply_to=reply_to,
        in_reply_to=in_reply_to,
        token=token or None,
    )
    assert type(got) is m.MailSend
    assert got == want


def test_mail_send_body_from_stdin(monkeypatch):
    req = run_hot(
        ("mail", "send"),
        {"to": "bob", "reply_to": []},
        SEND_OK,
        stdin="from stdin\n---\n",
        monkeypatch=monkeypatch,
    )
    got = request_decoder.decode(wire(req))
    assert got == m.MailSend(id=1, to="bob", body="from stdin\n---\n")


@settings(max_examples=100)
@given(
    handle=maybe(handles),
    state=maybe(st.sampled_from(["unread", "read", "all"])),
    limit=maybe(st.integers(min_value=-10, max_value=10_000)),
    cursor=maybe(text),
)
def test_mail_list_request_is_a_MailList(handle, state, limit, cursor):
    req = run_hot(
        ("mail", "list"),
        {"handle": handle, "state": state, "limit": limit, "cursor": cursor},
        LIST_OK,
    )
    got = request_decoder.decode(wire(req))
    assert type(got) is m.MailList
    assert got == m.MailList(
        id=1, handle=handle, state=state or "unread", limit=limit, cursor=cursor
    )


@settings(max_examples=100)
@given(handle=maybe(handles), mail_id=maybe(text))
def test_mail_read_request_is_a_MailRead(handle, mail_id):
    req = run_hot(("mail", "read"), {"handle": handle, "mail_id": mail_id}, READ_OK)
    got = request_decoder.decode(wire(req))
    assert type(got) is m.MailRead
    assert got == m.MailRead(id=1, handle=handle, mail_id=mail_id)


@settings(max_examples=100)
@given(content=text.filter(lambda t: t != "-"), token=env_text.filter(bool))  # "-": stdin
def test_job_report_request_is_a_JobReport(content, token):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_TOKEN", token)
        req = run_hot(("report",), {"text": content}, REPORT_OK)
    got = request_decoder.decode(wire(req))
    assert type(got) is m.JobReport
    assert got == m.JobReport(id=1, content=content, token=token)


def test_report_from_stdin(monkeypatch):
    monkeypatch.setenv("BENCH_TOKEN", "tok")
    req = run_hot(
        ("report",), {"text": "-"}, REPORT_OK, stdin="all done\n", monkeypatch=monkeypatch
    )
    assert request_decoder.decode(wire(req)) == m.JobReport(id=1, content="all done\n", token="tok")


def test_every_hot_command_is_covered():
    assert set(entry.COMMANDS) == {
        ("mail", "send"),
        ("mail", "list"),
        ("mail", "read"),
        ("report",),
        ("hook",),
    }


# ---------------------------------------------------------------- responses in lockstep


@pytest.mark.parametrize(
    "answer, printer",
    [
        (SEND_OK, output.sent),
        (
            m.SendOk(id=1, mail_id="x", path="/p", to="bob", key="k", live=True, duplicate=True),
            output.sent,
        ),
        (LIST_OK, lambda a: output.listing(a, "unread")),
        (
            m.ListOk(id=1, handle="bob", total=0, cap=50, truncated=False, messages=[]),
            lambda a: output.listing(a, "all"),
        ),
        (
            m.ListOk(
                id=1,
                handle="bob",
                total=9,
                cap=1,
                truncated=True,
                cursor="c1",
                messages=LIST_OK.messages,
            ),
            lambda a: output.listing(a, "unread"),
        ),
        (READ_OK, output.message),
    ],
)
def test_responses_decode_to_what_output_prints(answer, printer):
    a = client.loads(msgspec.json.encode(answer).decode())
    assert a["ok"] is True and a["type"] == answer.__struct_config__.tag
    text = printer(a)
    assert isinstance(text, str) and text
    if isinstance(answer, m.SendOk):
        assert answer.mail_id in text and answer.path in text
    if isinstance(answer, m.ReadOk):
        assert answer.path in text and text.endswith(answer.body)
    if isinstance(answer, m.ListOk) and answer.truncated:
        assert answer.cursor in text


def test_error_answer_reads_as_its_refusal():
    err = m.ErrorResponse(id=3, error=m.ErrorBody("bad-handle", "nope"))
    a = client.loads(msgspec.json.encode(err).decode())
    assert client.JSON.error(a) == ("bad-handle", "nope", None)


# ---------------------------------------------------------------- entry.parse vs click


def click_opts(argv: list[str], monkeypatch) -> tuple | None:
    """What the click CLI would hand to entry.run for argv (None if click refuses it)."""
    from bench_cli import cli

    seen = []
    monkeypatch.setattr(entry, "run", lambda cmd, opts: seen.append((cmd, opts)) or 0)
    res = CliRunner().invoke(cli.cli, argv, catch_exceptions=False)
    if res.exit_code != 0 or not seen:
        return None
    return seen[0]


def normal(opts: dict) -> dict:
    """Drop what means 'not given': None, False, [] and the default state."""
    return {
        k: v
        for k, v in opts.items()
        if v not in (None, False, [], ()) and not (k == "state" and v == "unread")
    }


VALID = [
    ["mail", "send", "bob", "-m", "hi"],
    ["mail", "send", "bob", "-m", "hi", "-s", "subj"],
    ["mail", "send", "-m", "hi", "bob"],
    ["mail", "send", "bob", "--message", "hi", "--subject", "a: b", "--json"],
    ["mail", "send", "bob", "--message=hi=there", "--subject=s", "--key=k1"],
    ["mail", "send", "bob", "-m", "hi", "--reply-to", "a", "--reply-to", "b", "--reply-to=c"],
    ["mail", "send", "bob", "-m", "hi", "--in-reply-to", "20261130T045611.123Z-0001"],
    ["mail", "send", "bob", "-m", "-starts-with-dash"],
    ["mail", "send", "bob", "-m", ""],
    ["mail", "send", "bob", "-m", "x", "--dir", "/tmp/somewhere"],
    ["mail", "send", "bob", "-m", "x", "--dir=/tmp/d"],
    ["mail", "send", "-m", "x", "--", "bob"],
    ["mail", "send", "-m", "x", "--", "-weird"],
    ["mail", "send", "bob"],
    ["mail", "send", "bob", "--json", "--json"],
    ["mail", "list"],
    ["mail", "list", "--json"],
    ["mail", "list", "--state", "all", "--limit", "500"],
    ["mail", "list", "--state=read", "--limit=1", "--handle=bob", "--cursor=c"],
    ["mail", "list", "--limit", "0"],
    ["mail", "list", "--limit", "-5"],
    ["mail", "list", "--state", "unread"],
    ["mail", "read"],
    ["mail", "read", "20261130T045611.123Z-0001"],
    ["mail", "read", "--handle", "bob", "--json"],
    ["mail", "read", "--", "x"],
    ["mail", "read", "x", "--handle=bob", "--dir", "/d"],
    ["report"],
    ["report", "done"],
    ["report", "-"],
    ["report", "--json", "some text", "--dir", "/d"],
    ["hook", "stop"],
    ["hook", "stop-failure", "--dir", "/d"],
    ["--dir", "/d", "hook", "permission"],
    # --dir and --json before the command, as for every command (after it wins)
    ["--dir", "/d", "mail", "send", "bob", "-m", "x"],
    ["--json", "mail", "list", "--state", "all"],
    ["--dir=/a", "mail", "read", "--dir", "/b"],
    ["--json", "--dir", "/d", "report", "x"],
]


@pytest.mark.parametrize("argv", VALID, ids=" ".join)
def test_hot_parse_agrees_with_click(argv, monkeypatch):
    parsed = entry.parse(argv)
    assert parsed is not None, argv
    want = click_opts(argv, monkeypatch)
    assert want is not None, argv
    assert parsed[0] == want[0]
    assert normal(parsed[1]) == normal(want[1])


def test_hot_parse_exact_dicts():
    assert entry.parse(["mail", "send", "bob", "-m", "hi"]) == (
        ("mail", "send"),
        {"reply_to": [], "to": "bob", "body": "hi"},
    )
    assert entry.parse(
        ["mail", "send", "bob", "--message=a=b", "--reply-to", "x", "--reply-to=y", "--json"]
    ) == (("mail", "send"), {"reply_to": ["x", "y"], "to": "bob", "body": "a=b", "json": True})
    assert entry.parse(["mail", "send", "-m", "x", "--", "--bob"]) == (
        ("mail", "send"),
        {"reply_to": [], "body": "x", "to": "--bob"},
    )
    assert entry.parse(["mail", "list", "--limit=7", "--state", "all"]) == (
        ("mail", "list"),
        {"limit": 7, "state": "all"},
    )
    assert entry.parse(["mail", "read"]) == (("mail", "read"), {})
    assert entry.parse(["mail", "read", "ID", "--handle", "bob"]) == (
        ("mail", "read"),
        {"mail_id": "ID", "handle": "bob"},
    )
    assert entry.parse(["report", "-"]) == (("report",), {"text": "-"})


@pytest.mark.parametrize(
    "argv",
    [
        ["mail", "send", "-s=subj", "bob", "-m", "hi"],
        ["mail", "send", "bob", "-m=body"],
        ["mail", "send", "bob", "-mbody"],
    ],
    ids=" ".join,
)
def test_hot_parse_short_options_agree_with_click_or_decline(argv, monkeypatch):
    parsed = entry.parse(argv)
    if parsed is None:
        return  # click's turn: fine
    want = click_opts(argv, monkeypatch)
    assert want is not None
    assert normal(parsed[1]) == normal(want[1])


UNUSUAL = [
    [],
    ["mail"],
    ["mail", "send"],  # no TO
    ["mail", "send", "-m", "x"],  # no TO
    ["mail", "send", "--help"],
    ["mail", "send", "-h"],
    ["mail", "send", "bob", "--bogus"],
    ["mail", "send", "bob", "-x"],
    ["mail", "send", "bob", "carol"],
    ["mail", "send", "bob", "-m"],  # value missing
    ["mail", "send", "bob", "-m", "a", "-m", "b"],  # given twice
    ["mail", "send", "bob", "--json=yes"],
    ["mail", "list", "--state", "bogus"],
    ["mail", "list", "--limit", "ten"],
    ["mail", "list", "extra"],
    ["mail", "list", "--help"],
    ["mail", "read", "a", "b"],
    ["mail", "read", "--bogus"],
    ["report", "a", "b"],
    ["hook", "explode"],
    ["hook"],
    ["hook", "stop", "extra"],
    ["report", "--help"],
    ["--dir"],
    ["--dir", "/d"],
    ["--json", "status"],
    ["--version"],
    ["status"],
    ["up"],
    ["events", "-f"],
    ["spawn", "--", "sh"],
    ["mailx", "send", "bob"],
    ["mail", "sendx", "bob"],
]


@pytest.mark.parametrize("argv", UNUSUAL, ids=lambda a: " ".join(a) or "<empty>")
def test_hot_parse_declines_anything_unusual(argv):
    assert entry.parse(argv) is None


# ---------------------------------------------------------------- the fast path's bytes


def _defaults(t: type) -> dict:
    info = msgspec.inspect.type_info(t)
    return {
        f.encode_name: f.default for f in info.fields if f.default is not msgspec.inspect.NODEFAULT
    } | {
        f.encode_name: f.default_factory()
        for f in info.fields
        if f.default_factory is not msgspec.inspect.NODEFAULT
    }


@pytest.mark.parametrize(
    "cmd, opts, answer, want",
    [
        (
            ("mail", "send"),
            {"to": "bob", "body": "hi\n", "subject": "s", "reply_to": ["a", "b"], "key": "k"},
            SEND_OK,
            m.MailSend(to="bob", body="hi\n", subject="s", reply_to=["a", "b"], key="k"),
        ),
        (
            ("mail", "send"),
            {"to": "bob", "body": "", "reply_to": []},
            SEND_OK,
            m.MailSend(to="bob"),
        ),
        (("mail", "list"), {"state": "unread"}, LIST_OK, m.MailList()),
        (
            ("mail", "list"),
            {"handle": "bob", "state": "all", "limit": 5, "cursor": "c"},
            LIST_OK,
            m.MailList(handle="bob", state="all", limit=5, cursor="c"),
        ),
        (("mail", "read"), {"mail_id": "x"}, READ_OK, m.MailRead(mail_id="x")),
        (("report",), {"text": "done"}, REPORT_OK, m.JobReport(content="done")),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_fast_path_bytes_are_the_msgspec_request(cmd, opts, answer, want):
    # The hand-written encoder's bytes decode with the request's own msgspec type into
    # the Struct, and say what msgspec's encoding of that Struct says: the same fields
    # with the same values, the only extra ones holding the field's default.
    want = msgspec.structs.replace(want, id=1)
    fast = wire(run_hot(cmd, opts, answer))
    assert msgspec.json.decode(fast, type=type(want)) == want
    typed = msgspec.json.decode(msgspec.json.encode(want))
    plain = json.loads(fast)
    assert {k: plain.get(k) for k in typed} == typed
    defaults = _defaults(type(want))
    assert {k: v for k, v in plain.items() if k not in typed} == {
        k: defaults[k] for k in plain if k not in typed
    }
