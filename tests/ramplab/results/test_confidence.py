"""The intervals a probe decides on, against values computed by hand and by scipy."""

from __future__ import annotations

import pytest
from scipy import stats

from ramplab.results.confidence import requests_to_pass, t_interval, wilson


def test_wilson_matches_the_textbook_value() -> None:
    # 81 good of 263 at 95 %: Wilson (1927) / Newcombe (1998) give 0.2553–0.3662.
    ci = wilson(81, 263, 0.95)
    assert ci.estimate == pytest.approx(81 / 263)
    assert ci.low == pytest.approx(0.2553, abs=5e-4)
    assert ci.high == pytest.approx(0.3662, abs=5e-4)


def test_wilson_at_all_good_has_a_lower_bound_below_one() -> None:
    ci = wilson(35, 35, 0.95)
    assert ci.high == pytest.approx(1.0)
    assert ci.low is not None
    assert ci.low == pytest.approx(35 / (35 + 1.959964**2))


def test_wilson_without_data_has_no_bounds() -> None:
    ci = wilson(0, 0)
    assert (ci.estimate, ci.low, ci.high) == (None, None, None)


def test_t_interval_matches_scipy() -> None:
    ratios = [0.9, 0.95, 1.0, 0.97]
    ci = t_interval(ratios, 0.95)
    low, high = stats.t.interval(0.95, 3, loc=sum(ratios) / 4, scale=stats.sem(ratios))
    assert ci.low == pytest.approx(low)
    assert ci.high == pytest.approx(min(1.0, high))


def test_t_interval_of_one_window_has_no_bounds() -> None:
    ci = t_interval([0.9])
    assert ci.estimate == 0.9
    assert ci.low is None


@pytest.mark.parametrize(("goal", "level"), [(0.9, 0.95), (0.95, 0.95), (0.99, 0.9)])
def test_requests_to_pass_is_the_smallest_perfect_sample_that_clears_the_goal(
    goal: float, level: float
) -> None:
    n = requests_to_pass(goal, level)
    low = wilson(n, n, level).low
    below = wilson(n - 1, n - 1, level).low
    assert low is not None
    assert below is not None
    assert low >= goal > below
