"""The prefix cache's cost on the target's hot path: what a request pays with it on vs off.

With the cache off a request's prompt is read once, by the tokenizer's ``count``. With it on,
the same request also cuts the prompt into blocks and hashes them (``lookup``) and records them
after prefill (``insert``). Both are measured in this process on the same prompts (English
prose of 1K, 16K and 128K approximate tokens), best of ``ROUNDS`` repetitions each, so the ratio
is the cache's CPU cost relative to the counting every request already pays. ``insert`` runs
against a cache already holding the prompt (a repeated prompt: the common case once warm) and,
separately, against an empty one bounded so that every insert evicts as many blocks as it adds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from target_service.metrics import TargetMetrics
from target_service.prefix_cache import PrefixCache
from target_service.settings import PrefixCacheSettings
from target_service.tokenizer import ApproxTokenizer

ROUNDS = 7
SIZES = (1_000, 16_000, 128_000)
SENTENCE = "The quick brown fox jumps over the lazy dog near the riverbank, twice. "


def _best(action: Callable[[], object], rounds: int = ROUNDS) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _prompt(tokens: int) -> str:
    return SENTENCE * (tokens // ApproxTokenizer().count(SENTENCE) + 1)


def _row(size: int) -> str:
    counter = ApproxTokenizer()
    text = _prompt(size)
    tokens = counter.count(text)
    warm = PrefixCache(
        PrefixCacheSettings(enabled=True, max_cached_tokens=1 << 30),
        TargetMetrics(CollectorRegistry()),
    )
    hashes = warm.lookup(text, tokens).hashes
    warm.insert(hashes)
    churn = PrefixCache(
        PrefixCacheSettings(enabled=True, max_cached_tokens=tokens),
        TargetMetrics(CollectorRegistry()),
    )
    serial = [0]

    def churn_once() -> None:
        # A new prompt each time (its first characters differ), so every block is new.
        serial[0] += 1
        variant = f"{serial[0]} {text}"
        churn.insert(churn.lookup(variant, tokens).hashes)

    count_s = _best(lambda: counter.count(text))
    lookup_s = _best(lambda: warm.lookup(text, tokens))
    insert_s = _best(lambda: warm.insert(hashes))
    churn_s = _best(churn_once)
    return (
        f"| {tokens:,} | {count_s * 1000:.2f} | {lookup_s * 1000:.2f} | "
        f"{insert_s * 1000:.2f} | {churn_s * 1000:.2f} | "
        f"{(count_s + lookup_s + insert_s) / count_s:.2f}× |"
    )


def run() -> str:
    rows = [_row(size) for size in SIZES]
    return "\n".join(
        [
            "## Prefix cache on the target's hot path (cache on vs off)",
            "",
            "CPU time of one request's prompt handling in one target process, best of "
            f"{ROUNDS}: `count` is what every request pays (cache off); with the cache on it "
            "also pays `lookup` (cut into 16-token blocks, hash each, walk the cache) and "
            "`insert` after prefill (prompt already cached). *new prompt* is lookup + insert "
            "of a prompt never seen, in a cache so full that every insert evicts as many "
            "blocks as it adds. The last column is the on/off ratio for a repeated prompt. "
            "Prompts: English prose.",
            "",
            "| prompt tokens | count ms (off) | lookup ms | insert ms | new prompt ms "
            "(lookup + insert, evicting) | on ÷ off |",
            "|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )
