"""How sure a probe is of its SLO attainment: intervals for a pooled ratio and across windows.

Two intervals, because they answer different doubts:

- ``wilson``: the Wilson score interval of the pooled ratio (good ÷ requests over the whole
  hold). It treats requests as independent trials; it stays inside [0, 1] and behaves at 0 % and
  100 % where the normal approximation collapses to a zero-width interval.
- ``t_interval``: Student's t interval of the mean of the per-window ratios. It sees drift and
  bursts *between* windows (requests in one window are not independent: a queue couples them),
  at the price of few degrees of freedom.

``lower_bound`` picks the one the search decides on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

__all__ = ["Interval", "Method", "requests_to_pass", "t_interval", "wilson"]

Method = Literal["wilson", "t"]


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate and its two-sided interval at ``level``; ``None`` bounds: no data."""

    estimate: float | None
    low: float | None
    high: float | None
    level: float
    method: Method


def _z(level: float) -> float:
    # The standard library's normal quantile: validating a campaign's search section needs it,
    # and scipy.stats costs the CLI 1.5 s of start-up.
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def wilson(good: int, total: int, level: float = 0.95) -> Interval:
    """Wilson score interval of ``good / total``."""
    if total <= 0:
        return Interval(None, None, None, level, "wilson")
    z = _z(level)
    p = good / total
    denom = 1.0 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), level, "wilson")


def t_interval(ratios: Sequence[float], level: float = 0.95) -> Interval:
    """Student's t interval of the mean of per-window ratios, clipped to [0, 1]; one window
    gives its value with no interval (``None`` bounds)."""
    n = len(ratios)
    if n == 0:
        return Interval(None, None, None, level, "t")
    mean = sum(ratios) / n
    if n == 1:
        return Interval(mean, None, None, level, "t")
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / (n - 1))
    from scipy import stats  # only a probe's verdict needs the t quantile

    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, max(0.0, mean - half), min(1.0, mean + half), level, "t")


def requests_to_pass(goal: float, level: float = 0.95) -> int:
    """The fewest requests whose Wilson lower bound can clear ``goal`` when every one is good:
    below this a probe cannot pass on its lower bound however healthy the target is."""
    if goal <= 0:
        return 1
    if goal >= 1:
        raise ValueError("a goal of 100 % can never be cleared by a lower bound")
    z = _z(level)
    # All good: low = n / (n + z²) ≥ goal  ⇔  n ≥ goal·z² / (1 − goal)
    return max(1, math.ceil(goal * z * z / (1.0 - goal)))
