"""Filler prompts of an exact length in tokens, cheap enough for a long trace at a high rate.

A replayed trace asks for prompts of its rows' input lengths — thousands of tokens each in
production traces. Drawing every word afresh (``SyntheticPrompts``) cost 7.1 ms of the worker's
one CPU for an 8,000-token prompt (measured 2026-12-03 on the loaded 2-core machine): time the
pacer and every other user wait for. Instead each process draws one pool of words once and each
prompt is a slice of it at a random start (0.24 ms for 8,000 tokens, same machine and day):
distinct prompts, no long shared prefix to warm a server's cache by accident, the exact length.
Every word is one of the synthetic prompts' four-letter words: one token for the reference
target and for any BPE-like counter.
"""

from __future__ import annotations

import functools
import random

from ramplab.workload.prompts import Messages

__all__ = ["filler_prompt"]

_WORDS = ("time", "data", "load", "rate", "node", "step", "line", "task", "wave", "peak")
POOL_WORDS = 1 << 16


@functools.cache
def _pool() -> tuple[str, ...]:
    rng = random.Random(0x5EED)
    words = [rng.choice(_WORDS) for _ in range(POOL_WORDS)]
    return tuple(words + words)  # doubled: any slice of up to POOL_WORDS words is contiguous


def filler_text(tokens: int, rng: random.Random) -> str:
    """``tokens`` words from the pool, starting at a random place."""
    pool = _pool()
    parts: list[str] = []
    left = tokens
    while left > 0:
        take = min(left, POOL_WORDS)
        start = rng.randrange(POOL_WORDS)
        parts.append(" ".join(pool[start : start + take]))
        left -= take
    return " ".join(parts)


def filler_prompt(tokens: int, rng: random.Random) -> Messages:
    """One user message of exactly ``tokens`` tokens."""
    return [{"role": "user", "content": filler_text(tokens, rng)}]
