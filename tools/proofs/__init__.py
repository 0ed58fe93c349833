"""The ring proofs: real daemons, real `bench` CLIs, stand-in or real agents passing a
number around as mail (`just mail-proof`, `just mail-proof-real`, `just bridge-proof`,
`just live-smoke`)."""
