"""Retry configuration: a dict (campaign YAML) or a short string (CLI) → validated ``RetrySetup``.

Dict form (every key optional except ``policy``)::

    policy: none | fixed | exponential | retry_after
    jitter: none | full | equal | decorrelated     # exponential only (default none)
    delay_s: 1.0                                   # fixed
    base_s: 0.1, cap_s: 5.0, multiplier: 2.0       # exponential (decorrelated ignores multiplier)
    retry_after_cap_s: 60                          # retry_after: longest server delay honoured
    retry_after_statuses: [429, 503]
    fallback: {policy: exponential, jitter: full}  # retry_after: back-off without a header
    max_attempts: 4                                # attempts in total (1 for none)
    retry_on: [429, 503, timeout, connection_dropped]   # statuses (int) and error kinds (str)
    budget: {ratio: 0.2, min_per_s: 10, ttl_s: 10}      # Finagle-style retry budget
    throttle: {k: 2, window_s: 120}                     # SRE adaptive throttling (or: true)

String form: ``none``, ``fixed``, ``exponential``, ``exponential:full`` (``:equal``,
``:decorrelated``), ``retry_after``; everything else at its default.

Errors are ``RetryConfigError`` naming the dotted field (``retry.budget.ratio``) and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ramplab.errors import RetryConfigError
from ramplab.retry.backoff import (
    Backoff,
    DecorrelatedJitter,
    EqualJitter,
    Exponential,
    Fixed,
    FullJitter,
    Rng,
)
from ramplab.retry.budget import RetryBudget
from ramplab.retry.policy import (
    DEFAULT_RETRY_KINDS,
    DEFAULT_RETRY_STATUSES,
    Retrier,
    RetryAfter,
    RetryOn,
)
from ramplab.retry.throttle import AdaptiveThrottle
from ramplab.retry.window import Clock

POLICIES = ("none", "fixed", "exponential", "retry_after")
JITTERS = ("none", "full", "equal", "decorrelated")
_BACKOFF_KEYS = {"policy", "jitter", "delay_s", "base_s", "cap_s", "multiplier"}
_KEYS = _BACKOFF_KEYS | {
    "max_attempts",
    "retry_on",
    "retry_after_cap_s",
    "retry_after_statuses",
    "fallback",
    "budget",
    "throttle",
}


def _num(
    d: Mapping[str, Any], key: str, default: float, field: str, *, minimum: float = 0
) -> float:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < minimum:
        raise RetryConfigError(f"{field}.{key}", f"expected a number ≥ {minimum}, got {v!r}")
    return float(v)


def _statuses(v: object, field: str) -> frozenset[int]:
    if not isinstance(v, list | tuple) or not all(
        isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in v
    ):
        raise RetryConfigError(field, f"expected a list of HTTP statuses, got {v!r}")
    return frozenset(v)


def _unknown(d: Mapping[str, Any], allowed: set[str], field: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise RetryConfigError(
            f"{field}.{extra[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
        )


def _backoff(d: Mapping[str, Any], field: str) -> Backoff | None:
    policy = d.get("policy")
    jitter = d.get("jitter", "none")
    if jitter not in JITTERS:
        raise RetryConfigError(
            f"{field}.jitter", f"expected one of {', '.join(JITTERS)}, got {jitter!r}"
        )
    if jitter != "none" and policy != "exponential":
        raise RetryConfigError(
            f"{field}.jitter", f"jitter applies to exponential only, not {policy!r}"
        )
    if policy == "none":
        return None
    if policy == "fixed":
        return Fixed(_num(d, "delay_s", 1.0, field))
    base = _num(d, "base_s", 0.1, field)
    cap = _num(d, "cap_s", 5.0, field)
    if cap < base:
        raise RetryConfigError(f"{field}.cap_s", f"must be ≥ base_s ({base}), got {cap}")
    mult = _num(d, "multiplier", 2.0, field, minimum=1)
    if jitter == "full":
        return FullJitter(base, cap, mult)
    if jitter == "equal":
        return EqualJitter(base, cap, mult)
    if jitter == "decorrelated":
        return DecorrelatedJitter(base, cap)
    return Exponential(base, cap, mult)


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    ratio: float
    min_per_s: float
    ttl_s: float


@dataclass(frozen=True, slots=True)
class ThrottleConfig:
    k: float
    window_s: float
    reject_statuses: frozenset[int]


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """The validated configuration (build one per run, then a ``RetrySetup`` per worker)."""

    policy: str
    backoff: Backoff | None
    max_attempts: int
    retry_on: RetryOn
    retry_after: RetryAfter | None = None
    budget: BudgetConfig | None = None
    throttle: ThrottleConfig | None = None


def parse_retry(spec: Mapping[str, Any] | str | None, field: str = "retry") -> RetryConfig:
    """Validate a retry configuration (see the module docstring)."""
    if spec is None:
        spec = {"policy": "none"}
    if isinstance(spec, str):
        name, _, jitter = spec.strip().partition(":")
        spec = {"policy": name} | ({"jitter": jitter} if jitter else {})
    if not isinstance(spec, Mapping):
        raise RetryConfigError(field, f"expected a mapping or a policy name, got {spec!r}")
    _unknown(spec, _KEYS, field)
    policy = spec.get("policy")
    if policy not in POLICIES:
        raise RetryConfigError(
            f"{field}.policy", f"expected one of {', '.join(POLICIES)}, got {policy!r}"
        )

    retry_after = None
    if policy == "retry_after":
        fb = spec.get("fallback", {"policy": "exponential", "jitter": "full"})
        if not isinstance(fb, Mapping):
            raise RetryConfigError(f"{field}.fallback", f"expected a mapping, got {fb!r}")
        _unknown(fb, _BACKOFF_KEYS, f"{field}.fallback")
        if fb.get("policy") not in ("none", "fixed", "exponential"):
            raise RetryConfigError(
                f"{field}.fallback.policy",
                f"expected none, fixed or exponential, got {fb.get('policy')!r}",
            )
        backoff = _backoff(fb, f"{field}.fallback")
        statuses = _statuses(
            spec.get("retry_after_statuses", [429, 503]), f"{field}.retry_after_statuses"
        )
        retry_after = RetryAfter(_num(spec, "retry_after_cap_s", 60.0, field), statuses)
    else:
        for key in ("fallback", "retry_after_cap_s", "retry_after_statuses"):
            if key in spec:
                raise RetryConfigError(
                    f"{field}.{key}", f"only applies to policy retry_after, not {policy!r}"
                )
        backoff = _backoff(spec, field)

    attempts = spec.get("max_attempts", 1 if policy == "none" else 4)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 100:
        raise RetryConfigError(
            f"{field}.max_attempts", f"expected an integer in 1..100, got {attempts!r}"
        )
    if policy == "none" and attempts != 1:
        raise RetryConfigError(
            f"{field}.max_attempts", f"policy none makes one attempt, got {attempts}"
        )

    retry_on = RetryOn(DEFAULT_RETRY_STATUSES, DEFAULT_RETRY_KINDS)
    if "retry_on" in spec:
        items = spec["retry_on"]
        ok = isinstance(items, list | tuple) and all(
            (isinstance(i, int) and not isinstance(i, bool) and 100 <= i <= 599)
            or (isinstance(i, str) and i)
            for i in items
        )
        if not ok:
            raise RetryConfigError(
                f"{field}.retry_on",
                f"expected a list of HTTP statuses and error kinds, got {items!r}",
            )
        retry_on = RetryOn.of(items)

    return RetryConfig(
        str(policy),
        backoff,
        attempts,
        retry_on,
        retry_after,
        _budget(spec, field),
        _throttle(spec, field),
    )


def _budget(spec: Mapping[str, Any], field: str) -> BudgetConfig | None:
    b = spec.get("budget")
    if b is None:
        return None
    f = f"{field}.budget"
    if not isinstance(b, Mapping):
        raise RetryConfigError(f, f"expected a mapping with ratio and min_per_s, got {b!r}")
    _unknown(b, {"ratio", "min_per_s", "ttl_s"}, f)
    if "ratio" not in b:
        raise RetryConfigError(f"{f}.ratio", "is required")
    ttl = _num(b, "ttl_s", 10.0, f)
    if ttl <= 0:
        raise RetryConfigError(f"{f}.ttl_s", f"must be > 0, got {ttl}")
    return BudgetConfig(_num(b, "ratio", 0.2, f), _num(b, "min_per_s", 10.0, f), ttl)


def _throttle(spec: Mapping[str, Any], field: str) -> ThrottleConfig | None:
    t = spec.get("throttle")
    if t is None or t is False:
        return None
    f = f"{field}.throttle"
    if t is True:
        t = {}
    if not isinstance(t, Mapping):
        raise RetryConfigError(f, f"expected true or a mapping with k and window_s, got {t!r}")
    _unknown(t, {"k", "window_s", "reject_statuses"}, f)
    k = _num(t, "k", 2.0, f, minimum=1)
    window = _num(t, "window_s", 120.0, f)
    if window <= 0:
        raise RetryConfigError(f"{f}.window_s", f"must be > 0, got {window}")
    statuses = _statuses(t.get("reject_statuses", [429, 503]), f"{f}.reject_statuses")
    return ThrottleConfig(k, window, statuses)


@dataclass
class RetrySetup:
    """One worker's retry machinery: the shared budget/throttle, and a fresh policy per user."""

    config: RetryConfig
    clock: Clock
    rng: Rng
    budget: RetryBudget | None = field(init=False, default=None)
    throttle: AdaptiveThrottle | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        b, t = self.config.budget, self.config.throttle
        if b is not None:
            self.budget = RetryBudget(b.ratio, b.min_per_s, self.clock, b.ttl_s)
        if t is not None:
            self.throttle = AdaptiveThrottle(
                self.clock, self.rng, t.k, t.window_s, t.reject_statuses
            )

    def policy(self) -> Retrier:
        """A ``RetryPolicy`` for one user (one request chain at a time)."""
        c = self.config
        return Retrier(
            c.backoff,
            self.rng,
            c.max_attempts,
            c.retry_on,
            c.retry_after,
            self.budget,
            self.throttle,
        )


def build_retry(spec: Mapping[str, Any] | str | None, clock: Clock, rng: Rng) -> RetrySetup:
    """``RetrySetup(parse_retry(spec), clock, rng)``: the factory a worker calls once."""
    return RetrySetup(parse_retry(spec), clock, rng)
