"""Shared-prefix workloads: N system prefixes of L tokens, each sent with M requests.

Request ``i`` of a run (its index in the arrival schedule, so every worker agrees) belongs to
generation ``g = i // (N × M)`` and uses prefix ``p = i mod N`` of it: the N prefixes take turns,
each is sent with exactly M requests, then the next generation brings N new ones. A prefix is
``L`` words drawn from a vocabulary of four-letter words by ``random.Random(f"{salt}:{g}:{p}")``
— one token each as the reference target's ``approx`` counter counts, so ``L`` is the prefix's
length in tokens there. When the campaign names a real tokenizer the words are its own
single-token words (``token_words.py``) and ``L`` is the prefix's length in its tokens.

The **salt** makes a run's prefixes its own. Fixed seeds silently warm a server's prefix cache
across the runs of a sweep (vLLM #54227 measured a 49× lower TTFT), so ``ramplab run`` draws a
fresh salt for every run and records it in ``run.json``; ``--prefix-salt`` fixes it, for a
deliberately warm rerun. A Locust process started by hand without one draws its own.
"""

from __future__ import annotations

import functools
import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ramplab.errors import UsageError
from ramplab.workload.token_words import TokenWords

__all__ = ["SharedPrefix", "parse_shared_prefix"]

_FIELDS = ("prefixes", "prefix_tokens", "requests_per_prefix")


def _vocabulary(size: int = 4096) -> tuple[str, ...]:
    rng = random.Random(14)
    words = {"".join(rng.choices(string.ascii_lowercase, k=4)) for _ in range(size * 2)}
    return tuple(sorted(words)[:size])


_VOCABULARY = _vocabulary()


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    prefixes: int  # N distinct prefixes at a time
    prefix_tokens: int  # L tokens each
    requests_per_prefix: int  # M requests share each

    def slot(self, index: int) -> tuple[int, int]:
        """(generation, prefix) of request ``index``."""
        return index // (self.prefixes * self.requests_per_prefix), index % self.prefixes

    def text(self, salt: str, index: int, words: TokenWords | None = None) -> str:
        """The system prefix of request ``index`` (in ``words``' tokenizer's tokens, if given)."""
        return _prefix_text(salt, *self.slot(index), self.prefix_tokens, words)

    def expected_hits(self, requests: int) -> int:
        """Requests among the first ``requests`` whose prefix an earlier request already sent
        (what a server whose cache never evicts would hit)."""
        per_generation = self.prefixes * self.requests_per_prefix
        whole, rest = divmod(requests, per_generation)
        return whole * (per_generation - self.prefixes) + max(0, rest - self.prefixes)


@functools.lru_cache(maxsize=256)
def _prefix_text(
    salt: str, generation: int, prefix: int, tokens: int, words: TokenWords | None
) -> str:
    rng = random.Random(f"{salt}:{generation}:{prefix}")
    if words is not None:
        return words.text(tokens, rng)
    return " ".join(rng.choices(_VOCABULARY, k=tokens))


def parse_shared_prefix(value: Mapping[str, Any], field: str) -> SharedPrefix | None:
    """``{"prefixes": N, "prefix_tokens": L, "requests_per_prefix": M}``; ``{}``: off."""
    if not value:
        return None
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise UsageError(f"{field}.{unknown[0]}", f"unknown field (expected {', '.join(_FIELDS)})")
    numbers: dict[str, int] = {}
    for name in _FIELDS:
        given = value.get(name)
        if not isinstance(given, int) or isinstance(given, bool) or given < 1:
            raise UsageError(f"{field}.{name}", f"must be a whole number ≥ 1, got {given!r}")
        numbers[name] = given
    return SharedPrefix(**numbers)
