"""The prefix cache's cost on the target's hot path: what a request pays with it on vs off.

With the cache off a request's prompt is read once, by the tokenizer's ``count``. With it on,
the request reads it once too, by ``scan`` (the count and the blocks' hashes in one pass), then
walks the cache (``lookup``) and records its blocks after prefill (``insert``). All are measured
in this process on the same prompts (English prose of 1K, 16K and 128K approximate tokens), best
of ``ROUNDS`` repetitions each, so the ratio is the cache's CPU cost relative to the counting
every request already pays. ``insert`` runs against a cache already holding the prompt (a
repeated prompt: the common case once warm) and, separately (*new prompt*), against one bounded
so that every insert evicts as many blocks as it adds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from target_service.metrics import TargetMetrics
from target_service.prefix_cache import PrefixCache
from target_service.settings import PrefixCacheSettings
from target_service.tokenizer import ApproxTokenizer

ROUNDS = 15
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
    hashes = warm.scan(text).hashes
    warm.insert(hashes)
    churn = PrefixCache(
        PrefixCacheSettings(enabled=True, max_cached_tokens=tokens),
        TargetMetrics(CollectorRegistry()),
    )
    serial = [0]

    def churn_once() -> None:
        # A new prompt each time (its first characters differ), so every block is new.
        serial[0] += 1
        blocks = churn.scan(f"{serial[0]} {text}")
        churn.lookup(blocks.hashes, blocks.tokens)
        churn.insert(blocks.hashes)

    # Interleaved, so each round's ratio compares runs a moment apart on a shared machine.
    rounds: list[tuple[float, float, float, float, float]] = []
    for _ in range(ROUNDS):
        rounds.append((
            _best(lambda: counter.count(text), 1),
            _best(lambda: warm.scan(text), 1),
            _best(lambda: warm.lookup(hashes, tokens), 1),
            _best(lambda: warm.insert(hashes), 1),
            _best(churn_once, 1),
        ))  # fmt: skip
    count_s, scan_s, lookup_s, insert_s, churn_s = (
        min(column) for column in zip(*rounds, strict=True)
    )
    ratio = statistics.median((r[1] + r[2] + r[3]) / r[0] for r in rounds)
    return (
        f"| {tokens:,} | {count_s * 1000:.2f} | {scan_s * 1000:.2f} | {lookup_s * 1000:.2f} | "
        f"{insert_s * 1000:.2f} | {churn_s * 1000:.2f} | "
        f"{ratio:.2f}× |"
    )


def run() -> str:
    load_before = os.getloadavg()[0]
    rows = [_row(size) for size in SIZES]
    load_after = os.getloadavg()[0]
    return "\n".join(
        [
            "## Prefix cache on the target's hot path (cache on vs off)",
            "",
            "CPU time of one request's prompt handling in one target process, best of "
            f"{ROUNDS}: with the cache off a request pays `count` (the approximate tokenizer); "
            "with it on, `scan` instead (one pass: the count and the 16-token blocks' hashes), "
            "then `lookup` (walk the cache) and `insert` after prefill (prompt already "
            "cached). *new prompt* is scan + lookup + insert of a prompt never seen, in a cache "
            "so full that every insert evicts as many blocks as it adds. The last column is "
            "on ÷ off for a repeated prompt: the median over the rounds of each round's ratio (the "
            "operations run interleaved, round after round; the times are each one's best). "
            "Prompts: English prose. Load average (1 min) of the shared machine: "
            f"{load_before:.1f} before, {load_after:.1f} after.",
            "",
            "| prompt tokens | count ms (off) | scan ms | lookup ms | insert ms | new prompt ms "
            "(evicting) | on ÷ off |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )
