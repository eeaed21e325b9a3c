"""Exact percentiles of any number of values in bounded memory: a radix selection over scans.

Why hand-written: numpy's ``percentile`` needs every value in memory at once, and so does
DuckDB's ``quantile_cont`` (whose interpolation also differs from numpy's in the last bits).
A run of ten million 16-token streams pools 150 million inter-token gaps: 1.2 GB of floats.

Here each value becomes a 64-bit key whose unsigned order is the float order (the usual IEEE
trick: flip the sign bit of a positive number, every bit of a negative one). The first scan
counts keys per group in 4,096 buckets of their top 12 bits (sign and exponent: a bucket per
binade); the ranks a percentile needs (``numpy.percentile``'s linear rule: ``(n − 1) · p``, and
its two neighbours) are located in their buckets from the counts. Each later scan collects the
values of the smallest wanted buckets, up to ``COLLECT_LIMIT`` values in all, and selects the
ranks among them; the other wanted buckets are split by their next 8 bits. A bucket narrowed to
all 64 bits is a single value. Memory is the histograms plus ``COLLECT_LIMIT`` values; the cost
is one scan per level (three in practice: counts, one split, the selection). The results are
numpy's to the bit: the same two order statistics combined by numpy's own interpolation (a test
holds them equal on generated data).

Groups: a metric's values come with a group index (a step); a "total" over every group is
answered too, from the same scans, so a run's figures and its steps' agree by construction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["COLLECT_LIMIT", "PERCENTS", "Exact", "GroupedValues", "exact_percentiles"]

PERCENTS = (50.0, 90.0, 95.0, 99.0, 99.9)
COLLECT_LIMIT = 1_000_000  # values gathered in one scan, over every wanted bucket (16 MB)
TOP_BITS = 12  # sign and exponent: one bucket per binade, 4,096 counters a group
STEP_BITS = 8
_SIGN = np.uint64(1 << 63)

Keys = NDArray[np.uint64]
# One batch: per metric, the group of each value and the values (float64).
GroupedValues = Mapping[str, tuple[NDArray[np.int64], NDArray[np.float64]]]
# A scan of the values of the metrics named (a scan may yield others too): a later scan asks
# only for the metrics still unresolved, so their source can read less.
Scan = Callable[[frozenset[str]], Iterable[GroupedValues]]


def order_keys(values: NDArray[np.float64]) -> Keys:
    """Keys whose unsigned order is the values' order."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def value_of(key: int) -> float:
    k = np.uint64(key)
    bits = (k & ~_SIGN) if (k & _SIGN) else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


@dataclass(slots=True)
class Exact:
    """A group's count, sum, and the values at the ranks its percentiles need."""

    count: int = 0
    total: float = 0.0
    at_rank: dict[int, float] = field(default_factory=dict)

    def percentiles(self) -> tuple[float, float, float, float, float] | None:
        """p50/p90/p95/p99/p99.9 as ``numpy.percentile`` gives them (``None`` when empty)."""
        if self.count == 0:
            return None
        lo, hi, gamma = _ranks(self.count)
        a = np.array([self.at_rank[int(r)] for r in lo])
        b = np.array([self.at_rank[int(r)] for r in hi])
        # numpy's ``_lerp``, verbatim: the same operations in the same order give the same bits.
        diff = b - a
        out = np.add(a, diff * gamma)
        np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
        return tuple(float(v) for v in out)  # type: ignore[return-value]

    @property
    def min(self) -> float | None:
        return self.at_rank[0] if self.count else None

    @property
    def max(self) -> float | None:
        return self.at_rank[self.count - 1] if self.count else None


def _ranks(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """numpy's ``linear`` method: the virtual index ``(n − 1) · q``, its floor and the next."""
    q = np.true_divide(np.asarray(PERCENTS), 100)
    virtual = (n - 1) * q
    previous = np.floor(virtual)
    gamma = np.asanyarray(virtual - previous)
    lo = previous.astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    above = virtual >= n - 1
    lo = np.where(above, n - 1, lo)
    hi = np.where(above, n - 1, hi)
    return lo, hi, gamma


def _wanted(n: int) -> set[int]:
    if n == 0:
        return set()
    lo, hi, _ = _ranks(n)
    return {0, n - 1, *(int(r) for r in lo), *(int(r) for r in hi)}


@dataclass(slots=True)
class _Target:
    group: int  # the group, or ``groups`` for the total
    rank: int  # in the group (or the total)
    within: int  # rank among the group's values that share ``prefix``
    prefix: int
    bits: int  # how many top bits of the key ``prefix`` fixes
    size: int  # values of every group that share ``prefix``


def exact_percentiles(scan: Scan, groups: Mapping[str, int]) -> dict[str, list[Exact]]:
    """For each metric of ``groups`` (its number of groups), an ``Exact`` per group and a last
    one for all groups together. ``scan()`` yields batches; it is called once per level."""
    hist = {m: np.zeros((g, 1 << TOP_BITS), dtype=np.int64) for m, g in groups.items()}
    sums = {m: np.zeros(g, dtype=np.float64) for m, g in groups.items()}
    for batch in scan(frozenset(groups)):
        for metric, (group, values) in batch.items():
            if metric not in hist or values.size == 0:
                continue
            g = groups[metric]
            top = (order_keys(values) >> np.uint64(64 - TOP_BITS)).astype(np.int64)
            flat = np.bincount(group * (1 << TOP_BITS) + top, minlength=g << TOP_BITS)
            hist[metric] += flat.reshape(g, 1 << TOP_BITS)
            sums[metric] += np.bincount(group, weights=values, minlength=g)
    out: dict[str, list[Exact]] = {}
    targets: dict[str, list[_Target]] = {}
    for metric, counts in hist.items():
        g = groups[metric]
        everyone = counts.sum(axis=0)
        per_group = [*counts, everyone]
        results = []
        mine: list[_Target] = []
        for index, row in enumerate(per_group):
            n = int(row.sum())
            total = float(sums[metric].sum()) if index == g else float(sums[metric][index])
            results.append(Exact(count=n, total=total))
            cumulative = np.cumsum(row)
            for rank in sorted(_wanted(n)):
                bucket = int(np.searchsorted(cumulative, rank, side="right"))
                before = int(cumulative[bucket - 1]) if bucket else 0
                size = int(everyone[bucket])
                mine.append(_Target(index, rank, rank - before, bucket, TOP_BITS, size))
        out[metric] = results
        targets[metric] = mine
    while any(targets.values()):
        targets = _narrow(scan, groups, targets, out)
    return out


def _narrow(
    scan: Scan,
    groups: Mapping[str, int],
    targets: Mapping[str, list[_Target]],
    out: dict[str, list[Exact]],
) -> dict[str, list[_Target]]:
    """One more scan: resolve the targets whose bucket is small, split the others by 8 bits."""
    # The buckets wanted, by metric: (prefix, bits) -> how many values fall in it (any group).
    jobs: dict[str, dict[tuple[int, int], list[_Target]]] = {}
    for metric, mine in targets.items():
        by_bucket: dict[tuple[int, int], list[_Target]] = defaultdict(list)
        for t in mine:
            if t.bits >= 64:  # the bucket is one key: one value
                out[metric][t.group].at_rank[t.rank] = value_of(t.prefix)
            else:
                by_bucket[(t.prefix, t.bits)].append(t)
        if by_bucket:
            jobs[metric] = dict(by_bucket)
    if not jobs:
        return {}
    collected: dict[str, dict[tuple[int, int], list[tuple[Keys, NDArray[np.int64]]]]] = {
        m: {b: [] for b in buckets} for m, buckets in jobs.items()
    }
    split: dict[str, dict[tuple[int, int], NDArray[np.int64]]] = {m: {} for m in jobs}
    sizes = {m: {b: ts[0].size for b, ts in buckets.items()} for m, buckets in jobs.items()}
    # The smallest buckets are collected now, within the budget; the rest are split.
    collect: set[tuple[str, tuple[int, int]]] = set()
    budget = COLLECT_LIMIT
    for size, metric, bucket in sorted(
        (size, m, b) for m, bs in sizes.items() for b, size in bs.items()
    ):
        if size <= budget:
            collect.add((metric, bucket))
            budget -= size
    for batch in scan(frozenset(jobs)):
        for metric, buckets in jobs.items():
            if metric not in batch:
                continue
            group, values = batch[metric]
            if values.size == 0:
                continue
            keys = order_keys(values)
            top = keys >> np.uint64(64 - TOP_BITS)
            wanted_tops = np.unique(
                np.fromiter((p >> (b - TOP_BITS) for p, b in buckets), dtype=np.uint64)
            )
            near = np.isin(top, wanted_tops)
            keys, group = keys[near], group[near]
            for bucket in buckets:
                prefix, bits = bucket
                inside = (keys >> np.uint64(64 - bits)) == np.uint64(prefix)
                if not inside.any():
                    continue
                if (metric, bucket) in collect:
                    collected[metric][bucket].append((keys[inside], group[inside]))
                else:
                    g, step = groups[metric], _step(bits)
                    shifted = keys[inside] >> np.uint64(64 - bits - step)
                    digit = (shifted & np.uint64((1 << step) - 1)).astype(np.int64)
                    index = group[inside] * (1 << step) + digit
                    counts = np.bincount(index, minlength=g << step).reshape(g, 1 << step)
                    previous = split[metric].get(bucket)
                    split[metric][bucket] = counts if previous is None else previous + counts
    remaining: dict[str, list[_Target]] = {}
    for metric, buckets in jobs.items():
        g = groups[metric]
        for bucket, mine in buckets.items():
            if (metric, bucket) in collect:
                _select(collected[metric][bucket], mine, g, out[metric])
                continue
            step = _step(bucket[1])
            counts = split[metric].get(bucket, np.zeros((g, 1 << step), dtype=np.int64))
            everyone = counts.sum(axis=0)
            for t in mine:
                row = everyone if t.group == g else counts[t.group]
                cumulative = np.cumsum(row)
                digit = int(np.searchsorted(cumulative, t.within, side="right"))
                before = int(cumulative[digit - 1]) if digit else 0
                prefix, bits = bucket
                remaining.setdefault(metric, []).append(
                    _Target(t.group, t.rank, t.within - before, (prefix << step) | digit,
                            bits + step, int(everyone[digit]))
                )  # fmt: skip
    return remaining


def _step(bits: int) -> int:
    """How many more bits the next split fixes (the last one may fix fewer than 8)."""
    return min(STEP_BITS, 64 - bits)


def _select(
    parts: list[tuple[Keys, NDArray[np.int64]]], targets: list[_Target], groups: int,
    out: list[Exact],
) -> None:  # fmt: skip
    keys = np.concatenate([k for k, _ in parts]) if parts else np.empty(0, np.uint64)
    owner = np.concatenate([o for _, o in parts]) if parts else np.empty(0, np.int64)
    by_group: dict[int, Keys] = {}
    for t in targets:
        if t.group not in by_group:
            by_group[t.group] = keys if t.group == groups else keys[owner == t.group]
        mine = by_group[t.group]
        key = int(np.partition(mine, t.within)[t.within])
        out[t.group].at_rank[t.rank] = value_of(key)


def batches_of(values: Iterator[GroupedValues]) -> Scan:
    """A scan over batches already in memory (tests; small inputs)."""
    kept = list(values)
    return lambda _metrics: kept
