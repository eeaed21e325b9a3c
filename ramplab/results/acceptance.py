"""How many requests a probe needs, and how many of them must be good: an exact binomial test.

A Wilson lower bound on a hold sized "so that a perfect probe can pass" makes the goal mean
100 %: with 35 arrivals and a 90 % goal, 34 good ones fail. The rule here states both error
rates instead (an acceptance-sampling plan):

- a probe of ``n`` arrivals **passes when at least** ``k(n)`` **met every SLO**, ``k(n)`` the
  smallest count that a system whose true attainment is only ``goal − tolerance`` (the *floor*)
  reaches with probability at most ``α = 1 − confidence`` — the exact one-sided binomial test of
  ``p ≤ floor``, so a clearly-too-slow rate passes at most ``α`` of the time whatever ``n`` is;
- the hold is **sized** to the fewest arrivals ``n`` for which a system at exactly the goal passes
  with probability at least ``power`` (a rate that meets the goal fails at most ``1 − power`` of
  the time).

The operating characteristic — the chance to pass at a true attainment ``p`` — is
``P(X ≥ k(n))`` for ``X ~ Binomial(n, p)``, computed exactly (``pass_probability``). Requests are
treated as independent trials; a queue couples neighbours, which the over-saturation checks
(``search/verdict.py``) catch separately.

scipy is imported inside the functions: the CLI's start-up should not pay for it when no search
runs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ATTAINMENTS",
    "Plan",
    "oc_markdown",
    "operating_characteristic",
    "pass_probability",
    "plan",
    "threshold",
]

# The sizing gives up past this many arrivals (a tolerance so small no probe could be that long).
MAX_REQUESTS = 1_000_000


@dataclass(frozen=True, slots=True)
class Plan:
    """A probe's sampling plan: ``requests`` arrivals, of which ``needed`` must be good."""

    goal: float
    floor: float  # goal − tolerance: passes with probability at most 1 − confidence
    confidence: float
    power: float  # a system at exactly the goal passes with at least this probability
    requests: int
    needed: int


@functools.cache
def threshold(requests: int, floor: float, confidence: float) -> int:
    """The fewest good arrivals out of ``requests`` that a system at ``floor`` reaches with
    probability at most ``1 − confidence``; ``requests + 1`` when no count is rare enough."""
    from scipy import stats

    if requests <= 0:
        return 1
    alpha = 1.0 - confidence
    if floor <= 0:
        return 1  # a system that never succeeds never has a good arrival
    k = max(1, int(stats.binom.ppf(1.0 - alpha, requests, floor)))
    while k <= requests and stats.binom.sf(k - 1, requests, floor) > alpha:
        k += 1
    while k > 1 and stats.binom.sf(k - 2, requests, floor) <= alpha:
        k -= 1
    return k


def pass_probability(requests: int, needed: int, attainment: float) -> float:
    """The chance that ``requests`` arrivals at true ``attainment`` have ``needed`` good ones."""
    from scipy import stats

    if needed <= 0:
        return 1.0
    return float(stats.binom.sf(needed - 1, requests, attainment))


@functools.cache
def plan(goal: float, tolerance: float, confidence: float, power: float) -> Plan:
    """The fewest arrivals for which a system at ``goal`` passes with ``power``, and the good
    ones they need (``ValueError`` when no size up to ``MAX_REQUESTS`` does it)."""
    floor = goal - tolerance
    if not 0 < goal <= 1 or tolerance <= 0:
        raise ValueError(f"no plan for goal {goal!r} with tolerance {tolerance!r}")
    n = 1
    while n <= MAX_REQUESTS:
        k = threshold(n, floor, confidence)
        if k <= n and pass_probability(n, k, goal) >= power:
            return Plan(goal, floor, confidence, power, n, k)
        # Far from the answer, step faster: the needed size grows like 1 / tolerance².
        n += 1 if n < 2000 else n // 100
    raise ValueError(f"no plan within {MAX_REQUESTS} requests for tolerance {tolerance!r}")


ATTAINMENTS = (0.80, 0.85, 0.90, 0.95, 1.00)


def operating_characteristic(
    chosen: Plan, attainments: Sequence[float] = ATTAINMENTS
) -> list[tuple[float, float]]:
    """``(true attainment, chance to pass)`` for a probe of ``chosen.requests`` arrivals."""
    return [(p, pass_probability(chosen.requests, chosen.needed, p)) for p in attainments]


def oc_markdown(chosen: Plan, attainments: Sequence[float] = ATTAINMENTS) -> str:
    """The operating characteristic as a Markdown table (what the docs show)."""
    head = (f"goal {chosen.goal * 100:g} %, floor {chosen.floor * 100:g} %, confidence "
            f"{chosen.confidence:g}, power {chosen.power:g}: {chosen.requests} arrivals, "
            f"pass with ≥ {chosen.needed} good")  # fmt: skip
    rows = [head, "", "| true attainment | P(pass) |", "| ---: | ---: |"]
    rows += [
        f"| {p * 100:g} % | {prob:.4f} |"
        for p, prob in operating_characteristic(chosen, attainments)
    ]
    return "\n".join(rows) + "\n"
