"""The live figures' sketch: within 1 % of the exact order statistic, and mergeable exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ramplab.metrics.sketch import ALPHA, Sketch

RNG = np.random.default_rng(5)
DISTRIBUTIONS = {
    "lognormal": RNG.lognormal(3, 1, 20_000),
    "heavy tail (pareto)": (RNG.pareto(1.2, 20_000) + 1) * 5,
    "constant": np.full(1_000, 20.0),
    "gaps with zeros": np.concatenate([np.zeros(500), RNG.exponential(2.0, 5_000)]),
}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_quantiles_within_the_stated_relative_error(name: str) -> None:
    values = DISTRIBUTIONS[name]
    sketch = Sketch()
    for v in values:
        sketch.add(float(v))
    ordered = np.sort(values)
    for q in (0.0, 0.5, 0.9, 0.99, 0.999, 1.0):
        exact = float(ordered[math.floor(q * (len(values) - 1))])
        got = sketch.quantile(q)
        assert got is not None
        assert abs(got - exact) <= ALPHA * exact + 1e-12, (name, q, got, exact)


def test_a_merge_is_the_sketch_of_the_union_and_travels_as_it_is() -> None:
    values = DISTRIBUTIONS["lognormal"]
    whole, halves = Sketch(), [Sketch(), Sketch()]
    for i, v in enumerate(values):
        whole.add(float(v))
        halves[i % 2].add(float(v))
    merged = Sketch.from_wire(halves[0].to_wire())
    merged.merge(Sketch.from_wire(halves[1].to_wire()))
    assert merged.to_wire() == whole.to_wire()
    assert merged.count == len(values)
    # Bounded: the number of buckets, not of values.
    assert len(whole.to_wire()["i"]) < 1_000
