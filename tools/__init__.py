"""Programs that are not tests: the ring proofs (tools/proofs), the crash loop and the
soak (tools/reliability) and the benchmarks (tools/perf). `just` runs them
(`just mail-proof`, `just soak`, `just bench`, ...); the tests in tests/ that drive them
import them from here. Run from the repository root (`python -m tools.perf.run`)."""
