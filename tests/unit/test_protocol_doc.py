"""docs/protocol.md is generated from the msgspec types and must be current."""

import os

from bench_wire import messages as m
from tests.conftest import ROOT
from tools.docgen import render


def test_protocol_doc_is_current():
    with open(os.path.join(ROOT, "docs", "protocol.md")) as f:
        on_disk = f.read()
    assert on_disk == render(), "docs/protocol.md is stale: run `just docs`"


def test_every_verb_and_event_is_documented():
    text = render()
    for t in (*m.REQUEST_TYPES, *m.EVENT_TYPES):
        assert f"### `{t.__struct_config__.tag}`" in text
