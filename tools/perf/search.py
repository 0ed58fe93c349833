"""search-scale: full-text mail/search (one word, limit 20) over 100,000 vs 1,000 messages.

The 100,000 are the mailbox list-scale, restart and rss use too (scale.Seed), filled
through the daemon from tools/perf/corpus.py's messages; the 1,000 are the corpus of
1,000 filled the same way into a fresh BENCH_DIR. Both indexes were built as mail
arrived, as a live daemon builds them.

Bodies are 40 words drawn from a vocabulary of 2,000; on top, each of 20 "needle" words is
planted in exactly 10 messages of each corpus. The timed queries cycle through the needle
words, so both corpora answer the same number of hits and the figure shows what the
store's size costs (an inverted index: lookups grow with log N and with the hits, not with
N). A vocabulary word (about 2% of the messages) is timed too and reported as a note.
The baseline is `grep -rl WORD mail/` over the 100,000 files (warm cache).
"""

import subprocess

from tools.perf.corpus import NEEDLES, PER_NEEDLE, VOCAB
from tools.perf.harness import Context, Daemon, Result, call, median, ms, now_ns, p99
from tools.perf.scale import HANDLE, filled, seed


def timed(conn, words: list[str], rounds: int, expect: int | None) -> list[int]:
    lat = []
    for _ in range(rounds):
        for w in words:
            t0 = now_ns()
            a = call(conn, "mail/search", query=w, handle=HANDLE, limit=20)
            lat.append(now_ns() - t0)
            if expect is not None and len(a["hits"]) != expect:
                raise RuntimeError(f"{w}: {len(a['hits'])} hits, not {expect}")
    return lat


def search_scale(ctx: Context) -> list[Result]:
    seeded = seed(ctx)
    n_big, big = seeded.n, seeded.dir
    small = filled(ctx, "q1k", 1000)
    rounds = ctx.size(10, 50)
    with Daemon(big) as d_big, Daemon(small) as d_small:
        cb, cs = d_big.connect(), d_small.connect()
        timed(cb, NEEDLES, 2, PER_NEEDLE)  # warm-up
        timed(cs, NEEDLES, 2, PER_NEEDLE)
        lat_big, lat_small = [], []
        for _ in range(rounds):  # alternate, so both see the same machine load
            lat_big += timed(cb, NEEDLES, 1, PER_NEEDLE)
            lat_small += timed(cs, NEEDLES, 1, PER_NEEDLE)
        common = VOCAB[:20]
        common_big = timed(cb, common, ctx.size(2, 5), 20)
        cb.close()
        cs.close()
    grep_ns = []
    for word in NEEDLES[: ctx.size(1, 3)]:
        t0 = now_ns()
        out = subprocess.run(
            ["grep", "-rl", word, "mail/"], cwd=big, capture_output=True, text=True
        )
        grep_ns.append(now_ns() - t0)
        if len(out.stdout.split()) != PER_NEEDLE:
            raise RuntimeError(f"grep found {len(out.stdout.split())} files for {word}")
    pb, ps, g = p99(lat_big), p99(lat_small), median(grep_ns)
    params = {
        "big": n_big,
        "small": 1000,
        "queries": len(lat_big),
        "limit": 20,
        "stat": "p99 (nearest rank)",
        "hits_per_query": PER_NEEDLE,
        "big_p50_ms": ms(median(lat_big)),
        "small_p50_ms": ms(median(lat_small)),
        "common_word_p99_ms": ms(p99(common_big)),
        "common_word": "a vocabulary word in ~2% of messages, 20 hits returned",
        **seeded.note(),
    }
    return [
        Result("search-scale", "ms", ms(pb), ms(ps), pb / ps, "<=", 2.0, params=params),
        Result(
            "search-scale/grep",
            "ms",
            ms(pb),
            ms(g),
            g / pb,
            ">=",
            50,
            ratio_note="grep/search",
            params=dict(params, grep_runs=len(grep_ns), grep="grep -rl WORD mail/"),
        ),
    ]
