"""bench_cli.hints: what a user probably meant, for an address on another node."""


def test_an_address_on_another_node_is_hinted_in_lower_case_or_by_a_known_one():
    from bench_cli.hints import address

    assert address("Carol@node2", set()) == " (did you mean carol@node2?)"
    assert address("carol@NODE2", set()) == " (did you mean carol@node2?)"
    assert address("carl@node2", {"carol@node2", "bob"}) == " (did you mean carol@node2?)"
    assert address("x@node2", {"bob"}) == ""
    assert address("_bad@node2", set()) == ""  # lower case would not make it an address
    assert address("Bob", {"bob", "alice"}) == " (did you mean bob?)"
