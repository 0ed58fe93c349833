"""`bench dash`: the operator's terminal dashboard (Textual; the optional `bench[dash]` extra).

Nothing in the CLI imports this package except the `dash` command itself, so no other
command loads Textual.
"""
