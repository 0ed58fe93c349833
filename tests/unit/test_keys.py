"""The key rules (benchd/core/keys.py): one limit for callers, the derived forms bench
writes, and the error text that states the limit."""

import pytest

from bench_wire.errors import CODES, WireError
from benchd.core import keys
from benchd.core.keys import KEY_MAX


def refused(fn, key: str) -> str:
    with pytest.raises(WireError) as exc:
        fn(key)
    assert exc.value.code == "bad-key"
    return exc.value.message


def test_one_limit_stated_by_the_error_text():
    assert KEY_MAX == 256
    assert f"1-{KEY_MAX} characters" in CODES["bad-key"]
    assert f"1-{KEY_MAX} characters" in refused(keys.check_client_key, "k" * (KEY_MAX + 1))


@pytest.mark.parametrize("key", ["k", "k" * KEY_MAX, "deploy:v2 (retry)", "ünïcode"])
def test_a_caller_may_choose(key):
    keys.check_client_key(key)
    keys.check_key(key)


@pytest.mark.parametrize("key", ["", "k" * (KEY_MAX + 1), "a\nb", "tab\there", "\x7f"])
def test_a_caller_may_not_choose(key):
    refused(keys.check_client_key, key)
    refused(keys.check_key, key)


def test_the_reserved_prefix_is_refused_to_callers_only():
    assert "reserved" in refused(keys.check_client_key, "outbox:mine")
    keys.check_key("outbox:mine")  # what the mailroom stores: not a caller's choice


def test_a_longest_job_key_still_gets_its_replies():
    job = "k" * KEY_MAX
    reply = keys.reply_key(job, 12)
    assert len(reply) > KEY_MAX
    assert keys.job_key_of(reply) == job
    keys.check_key(reply)  # the mailroom stores it (a job's reply is its send)
    refused(keys.check_client_key, reply)  # but no caller may choose it


@pytest.mark.parametrize(
    "key",
    [
        "outbox:" + "k" * (KEY_MAX + 1) + ":reply:0",  # the job key is too long
        "outbox:" + "k" * KEY_MAX + ":reply:x",  # the index is no number
        "outbox:" + "k" * KEY_MAX + ":reply:",  # no index
        "box:" + "k" * KEY_MAX + ":reply:1",
    ],
)
def test_no_other_long_key_passes_as_a_reply_key(key):
    assert keys.job_key_of(key) is None
    refused(keys.check_key, key)


def test_a_reply_to_several_recipients_keys_each_send():
    key = keys.recipient_key("k" * KEY_MAX, "bob-the-builder")
    keys.check_key(key)
    refused(keys.check_key, "k" * KEY_MAX + ":Not A Handle")
    refused(keys.check_key, "k" * (KEY_MAX + 1) + ":bob")


@pytest.mark.parametrize("key", ["a\nb", "tab\there", "\x7f", "outbox:a\x1fb:reply:0"])
def test_the_job_core_refuses_what_the_mailroom_refuses(key):
    # One rule: a job's mail never carries a key its own replies could not be sent with.
    refused(keys.check_key, key)
