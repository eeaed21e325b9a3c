"""Closed-form predictions for retry policies (§4.4): what a policy should cost and buy.

Independent faults (each attempt fails with probability ``p``, whatever came before), a chain
of at most ``n`` attempts:

- attempts per request  ``A = Σ_{k<n} p^k = (1 − p^n) / (1 − p)``
- success ratio         ``S = 1 − p^n``
- and always ``S = (1 − p) · A``: every attempt succeeds with ``1 − p`` and a chain stops at its
  first success, so successes = attempts × (1 − p) whatever limits the attempts.

A retry budget (Finagle: retries ≤ ``ratio`` · requests + ``min_per_s`` · (T + ttl)) caps
``A`` at ``1 + ratio + min_per_s · (T + ttl) / N``; under the cap ``S = (1 − p) · A`` still holds.

SRE adaptive throttling rejects with ``max(0, (requests − K · accepts) / (requests + 1))``.
Against independent faults, accepts = ``(1 − p)`` × sent, so with a rejected share ``r`` the
formula gives ``r = 1 − K (1 − p)(1 − r)``: below ``p* = 1 − 1/K`` the right side is negative at
``r = 0`` and nothing is rejected; above it the only fixed point is ``r → 1`` (the client keeps
backing off until the window forgets). So throttling is invisible under ``p < 1 − 1/K``.

Overload shedding (the target refuses a request that finds ``K`` already waiting for one of
``c`` slots) is modelled as an M/M/c/(c+K) loss system fed by the retry-inflated load
``λ · A(p)``: ``p = B(λ · A(p) · s)``, solved as a fixed point. The service times of the target
are nearly deterministic and retries arrive just after a refusal, when the queue is still full —
both are outside this model, and the measured difference says how much they matter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "ChainPrediction",
    "budget_cap",
    "erlang_blocking",
    "independent",
    "shed_fixed_point",
    "throttle_rejection",
    "with_cap",
]


@dataclass(frozen=True, slots=True)
class ChainPrediction:
    """What a policy should give per request: attempts, success and their sampling spread."""

    amplification: float  # attempts ÷ requests
    success: float  # succeeded ÷ requests
    attempts_sd: float  # standard deviation of one request's attempts


def independent(p: float, max_attempts: int) -> ChainPrediction:
    """Independent faults with probability ``p``, at most ``max_attempts`` attempts."""
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be ≥ 1, got {max_attempts}")
    n = max_attempts
    # P(K = k) = p^(k−1)(1 − p) for k < n, P(K = n) = p^(n−1).
    probs = [p ** (k - 1) * (1 - p) for k in range(1, n)] + [p ** (n - 1)]
    mean = sum(k * q for k, q in enumerate(probs, start=1))
    second = sum(k * k * q for k, q in enumerate(probs, start=1))
    return ChainPrediction(mean, 1 - p**n, math.sqrt(max(0.0, second - mean * mean)))


def budget_cap(
    ratio: float, min_per_s: float, requests: int, duration_s: float, ttl_s: float
) -> float:
    """The highest amplification a retry budget allows over ``requests`` in ``duration_s``."""
    if requests <= 0:
        return math.inf
    return 1 + ratio + min_per_s * (duration_s + ttl_s) / requests


def with_cap(p: float, max_attempts: int, cap: float) -> ChainPrediction:
    """Independent faults, attempts capped by a budget: ``A = min(A, cap)``, ``S = (1 − p) A``."""
    free = independent(p, max_attempts)
    if free.amplification <= cap:
        return free
    # The budget grants retries to whoever fails while it lasts: the spread stays about that
    # of the free chain, scaled with the mean.
    sd = free.attempts_sd * cap / free.amplification
    return ChainPrediction(cap, (1 - p) * cap, sd)


def throttle_rejection(p: float, k: float) -> float:
    """Steady-state share of attempts adaptive throttling rejects under independent faults."""
    return 0.0 if k * (1 - p) >= 1 else 1.0


def erlang_blocking(offered: float, servers: int, waiting: int) -> float:
    """Blocking probability of M/M/c/(c+K) at ``offered`` Erlangs (λ · mean service time)."""
    if offered <= 0:
        return 0.0
    if servers < 1 or waiting < 0:
        raise ValueError(f"need servers ≥ 1 and waiting ≥ 0, got {servers}, {waiting}")
    terms = [1.0]
    for n in range(1, servers + waiting + 1):
        terms.append(terms[-1] * offered / min(n, servers))
    return terms[-1] / sum(terms)


def shed_fixed_point(
    rate: float,
    service_s: float,
    servers: int,
    waiting: int,
    amplification: Callable[[float], float],
) -> float:
    """The refusal probability ``p`` with ``p = B(rate · A(p) · service_s)``, ``A`` the policy's
    attempts per request at fault ratio ``p``. ``B`` rises with ``p`` and stays below 1, so
    iterating from 0 climbs monotonically to the smallest fixed point."""
    p = 0.0
    for _ in range(500):
        nxt = erlang_blocking(rate * amplification(p) * service_s, servers, waiting)
        if abs(nxt - p) < 1e-9:
            return nxt
        p = nxt
    return p
