"""docs/limits.md lists every limit: each daemon option that sets one, with its default,
and each fixed cap hello reports."""

import os

import msgspec

from bench_wire.config import OPTIONS
from bench_wire.messages import Caps
from tests.support.daemon import ROOT

# Options that tune timing rather than limit anything.
TIMING = {"--idle-gate", "--paste-settle", "--enter-check", "--retry-base", "--stall-after"}
# Caps named in the doc by their option instead (the table's option column).
BY_OPTION = {
    "connections": "--max-connections",
    "send_burst": "--send-burst",
    "send_rate": "--send-rate",
    "operator_send_burst": "--operator-send-burst",
    "operator_send_rate": "--operator-send-rate",
    "mailbox_messages": "--mailbox-messages",
    "mailbox_bytes": "--mailbox-bytes",
    "reply_to_max": "--reply-to-max",
}


def doc() -> str:
    with open(os.path.join(ROOT, "docs", "limits.md")) as f:
        return f.read()


def test_every_limit_option_is_listed_with_its_default():
    text = doc()
    for o in OPTIONS:
        flag, default = o.flag, o.default
        if flag in TIMING:
            continue
        row = next((line for line in text.splitlines() if f"`{flag} " in line), None)
        assert row is not None, f"{flag} is not in docs/limits.md"
        shown = f"{default:,}" if isinstance(default, int) else f"{default:g}"
        if default == 256 * 1024 * 1024:
            shown = "256 MiB"
        assert shown in row, (flag, default, row)


def test_every_cap_hello_reports_is_listed():
    text = doc()
    for field in msgspec.structs.fields(Caps):
        name = BY_OPTION.get(field.name, field.name)
        assert name in text, f"caps.{field.name} is not in docs/limits.md"
