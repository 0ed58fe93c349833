"""`bench bridge` and `bench nodes init` show their numbers' defaults in --help without
importing the bridge (its extra may be missing), so bench_cli says them again: this
holds each to the bridge's own default, so the two cannot drift apart."""

import dataclasses

import pytest

from bench_cli.commands import nodes

bridge = pytest.importorskip("bench_bridge.local", reason="the bridge extra is not installed")
streams = pytest.importorskip("bench_bridge.streams", reason="the bridge extra is not installed")


def defaults(cls: type) -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("table", "owner"),
    [(nodes._BRIDGE_LIMITS, bridge.Options), (nodes._QUOTAS, streams.Quotas)],
    ids=["bridge", "nodes-init"],
)
def test_the_cli_says_the_bridges_own_defaults(table, owner):
    own = defaults(owner)
    said = {flag[2:].replace("-", "_"): (kind, default) for flag, kind, default, _ in table}
    assert said.keys() <= own.keys()
    for name, (kind, default) in said.items():
        assert kind(default) == own[name], name
        assert isinstance(own[name], kind), name
