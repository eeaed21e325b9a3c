"""``MeasuredCounter`` (a worker's running counts) equals ``count_measured`` (the whole list)."""

from __future__ import annotations

import numpy as np
import pytest

from ramplab.load.shapes import parse_shape
from ramplab.results.steps import MeasuredCounter, count_measured


@pytest.mark.parametrize("spec", ["2,4,8@10s/2s", "5@30s/0s", "1,100@1s/0.5s"])
def test_counting_one_at_a_time_equals_counting_the_list(spec: str) -> None:
    shape = parse_shape(spec)
    rng = np.random.default_rng(3)
    offsets = rng.uniform(-1.0, shape.duration_s + 1.0, 5000)
    # The edges themselves: a window's first instant counts, its end does not.
    edges = [x for st in shape.stages for x in (st.start_s, st.measured_start_s, st.end_s)]
    offsets = np.concatenate([offsets, edges, np.nextafter(edges, -np.inf)])
    counter = MeasuredCounter(shape)
    for offset in offsets:
        counter.add(float(offset))
    assert counter.counts == count_measured(offsets, shape)
