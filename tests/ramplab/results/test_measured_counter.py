"""``MeasuredCounter`` (a worker's running counts) equals ``count_measured`` (the whole list);
``MeasuredPeak`` keeps each measured window's maximum."""

from __future__ import annotations

import numpy as np
import pytest

from ramplab.load.shapes import parse_shape
from ramplab.results.steps import MeasuredCounter, MeasuredPeak, count_measured


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


def test_measured_peak_keeps_each_measured_window_maximum() -> None:
    peak = MeasuredPeak(parse_shape("1,2@4s/1s"))
    for offset, users in [(0.5, 9), (1.5, 3), (2.0, 5), (3.9, 4), (4.5, 7), (6.0, 6), (9.0, 50)]:
        peak.add(offset, users)
    assert peak.peaks == [5, 6]  # warm-ups (0.5 s, 4.5 s) and past the end (9 s) left out
