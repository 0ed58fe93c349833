"""`bench dash`: the operator's terminal dashboard (Textual; the optional `bench[dash]` extra).
Only the `dash` command imports this package, so no other command loads Textual."""
