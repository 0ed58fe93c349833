"""The messages of the 100,000-message mailbox that list-scale, restart, rss, send-scale
and search-scale share (and of search-scale's 1,000-message one).

Message i of a corpus of n: a subject of 4 words and a body of 40, drawn from a
vocabulary of 2,000 by a generator seeded with i (so any client process can make any
message without the ones before it); on top, each of 20 "needle" words is planted in
exactly 10 messages of the corpus, which search-scale's timed queries look for.
"""

import random
from functools import lru_cache

NEEDLES = [f"needle{i:02d}" for i in range(20)]
PER_NEEDLE = 10
VOCAB = [f"w{i:04d}x" for i in range(2000)]
SEED = 7


@lru_cache(maxsize=4)
def planted(n: int) -> dict[int, list[str]]:
    """Which messages of a corpus of n carry which needles."""
    rnd = random.Random(SEED)
    out: dict[int, list[str]] = {}
    for word in NEEDLES:
        for i in rnd.sample(range(n), PER_NEEDLE):
            out.setdefault(i, []).append(word)
    return out


def message(i: int, n: int) -> tuple[str, str]:
    """(subject, body) of message i of a corpus of n."""
    rnd = random.Random(SEED * 1_000_003 + i)
    words = rnd.choices(VOCAB, k=40) + planted(n).get(i, [])
    rnd.shuffle(words)
    return " ".join(rnd.choices(VOCAB, k=4)), " ".join(words)
