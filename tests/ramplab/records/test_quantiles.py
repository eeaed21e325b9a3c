"""Exact percentiles by radix selection equal ``numpy.percentile`` to the bit, in any batching,
whatever the distribution — also when every bucket is forced to split down to single values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ramplab.records import quantiles
from ramplab.records.quantiles import GroupedValues, exact_percentiles

RNG = np.random.default_rng(7)
CASES = {
    "exponential": RNG.exponential(2.0, 1000),
    "heavy tail": RNG.lognormal(0, 3, 400),
    "constant": np.full(500, 2.0),
    "normal, negatives": RNG.normal(0, 1, 777),
    "one value": np.array([5.0]),
    "empty": np.array([]),
    "few distinct": RNG.integers(0, 3, 1000).astype(float),
    "extremes": np.array([-0.0, 0.0, 1e-300, -1e-300, 1e300, 5e-324]),
}


@pytest.mark.parametrize("limit", [quantiles.COLLECT_LIMIT, 700, 7, 0])
def test_equal_to_numpy_per_group_and_in_total(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(quantiles, "COLLECT_LIMIT", limit)
    arrays = list(CASES.values())
    batches: list[GroupedValues] = []
    for group, values in enumerate(arrays):
        for chunk in np.array_split(values, 3):
            batches.append({"m": (np.full(chunk.size, group, dtype=np.int64), chunk)})
    RNG.shuffle(batches)  # type: ignore[arg-type]
    scans = 0

    def scan(_metrics: frozenset[str]) -> list[GroupedValues]:
        nonlocal scans
        scans += 1
        return batches

    result = exact_percentiles(scan, {"m": len(arrays)})["m"]
    for name, values, exact in zip([*CASES, "total"], [*arrays, np.concatenate(arrays)],
                                   result, strict=True):  # fmt: skip
        assert exact.count == values.size, name
        if values.size == 0:
            assert exact.percentiles() is None
            continue
        want = tuple(float(v) for v in np.percentile(values, [50, 90, 95, 99, 99.9]))
        assert exact.percentiles() == want, name
        assert (exact.min, exact.max) == (values.min(), values.max()), name
        assert exact.total / exact.count == pytest.approx(values.mean(), rel=1e-12), name
    # One scan for the histograms, then one per 8 bits narrowed at most.
    assert scans <= 1 + math.ceil((64 - quantiles.TOP_BITS) / quantiles.STEP_BITS)
