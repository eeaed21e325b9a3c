"""Filler prompts of an exact length in tokens, cheap enough for a long trace at a high rate.

A replayed trace asks for prompts of its rows' input lengths — thousands of tokens each in
production traces. Drawing every word afresh (``SyntheticPrompts``) cost 7.1 ms of the worker's
one CPU for an 8,000-token prompt (measured 2026-12-03 on the loaded 2-core machine): time the
pacer and every other user wait for. Instead each process draws one pool of words once and each
prompt is a slice of it at a random start (0.24 ms for 8,000 tokens, same machine and day):
distinct prompts, no long shared prefix to warm a server's cache by accident, the exact length.
Every word is one of the synthetic prompts' four-letter words: one token for the reference
target's ``approx`` counter. When the campaign names a real tokenizer (``token_words.py``) the
pool is drawn from that tokenizer's single-token words instead, and a slice of N of them is N of
its tokens.
"""

from __future__ import annotations

import functools
import random

from ramplab.workload.prompts import Messages
from ramplab.workload.token_words import TokenWords

__all__ = ["filler_prompt"]

_WORDS = ("time", "data", "load", "rate", "node", "step", "line", "task", "wave", "peak")
POOL_WORDS = 1 << 16


@functools.cache
def _pool(words: TokenWords | None = None) -> tuple[str, ...]:
    rng = random.Random(0x5EED)
    if words is None:
        drawn = [rng.choice(_WORDS) for _ in range(POOL_WORDS)]
    else:
        drawn = words.draw(POOL_WORDS, rng)
    return tuple(drawn + drawn)  # doubled: any slice of up to POOL_WORDS words is contiguous


def filler_text(tokens: int, rng: random.Random, words: TokenWords | None = None) -> str:
    """``tokens`` words from the pool, starting at a random place: ``tokens`` tokens of the
    ``approx`` counter, or of ``words``' tokenizer."""
    pool = _pool(words)
    if words is not None and not words.local:  # verified and made exact (token_words.py)
        start = rng.randrange(POOL_WORDS)
        drawn = [pool[(start + i) % POOL_WORDS] for i in range(tokens)]
        return words.exact(drawn, tokens, rng)
    parts: list[str] = []
    left = tokens
    while left > 0:
        take = min(left, POOL_WORDS)
        start = rng.randrange(POOL_WORDS)
        parts.append(" ".join(pool[start : start + take]))
        left -= take
    return " ".join(parts)


def filler_prompt(tokens: int, rng: random.Random, words: TokenWords | None = None) -> Messages:
    """One user message of exactly ``tokens`` tokens (of ``words``' tokenizer, when given)."""
    return [{"role": "user", "content": filler_text(tokens, rng, words)}]
