"""Deterministic output text: the same seed always yields the same tokens.

Each output token is one word with a leading space, drawn from a fixed vocabulary by a generator
seeded with the request's seed, so a client that knows the seed (or the response's signature) can
check the integrity of what it received.
"""

from __future__ import annotations

import random

_SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "sa", "vel", "no", "qui", "dra", "fen", "zo", "ith")


def _vocabulary(size: int = 2048) -> tuple[str, ...]:
    rng = random.Random(20240607)
    words = {
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(size * 2)
    }
    return tuple(" " + word for word in sorted(words)[:size])


VOCABULARY = _vocabulary()


def generate_tokens(seed: int, count: int) -> list[str]:
    """The first ``count`` output tokens for ``seed``; a prefix of any longer call's result."""
    return random.Random(seed).choices(VOCABULARY, k=count)
