from __future__ import annotations

import random

import numpy as np
import pytest

from ramplab.errors import RetryConfigError, UsageError
from ramplab.retry import (
    AdaptiveThrottle,
    AttemptOutcome,
    DecorrelatedJitter,
    EqualJitter,
    Exponential,
    Fixed,
    FullJitter,
    Retrier,
    RetryAfter,
    RetryBudget,
    RetryOn,
    RetryPolicy,
    SlidingCounter,
    build_retry,
    parse_retry,
)

DRAWS = 5000


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FixedRng:
    """Returns the queued values in order (for exact threshold checks)."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def fail(
    attempt: int,
    status: int | None = 503,
    kind: str | None = "http_status",
    retry_after: float | None = None,
) -> AttemptOutcome:
    return AttemptOutcome(attempt, False, status, kind, retry_after)


def ok(attempt: int = 1) -> AttemptOutcome:
    return AttemptOutcome(attempt, True, 200, None, None)


# --- back-off formulas -------------------------------------------------------------------


def test_fixed_and_exponential_are_exact() -> None:
    rng = np.random.default_rng(0)
    assert [Fixed(0.7).delay(n, None, rng) for n in (1, 2, 9)] == [0.7, 0.7, 0.7]
    exp = Exponential(0.1, 1.0)
    assert [exp.delay(n, None, rng) for n in range(1, 7)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    )
    assert Exponential(0.1, 5, multiplier=3).delay(3, None, rng) == pytest.approx(0.9)
    assert Exponential(0.1, 5).delay(100_000, None, rng) == 5  # no overflow past the cap


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 8])
def test_full_jitter_within_zero_and_the_capped_exponential(attempt: int) -> None:
    rng = np.random.default_rng(attempt)
    policy = FullJitter(0.1, 1.0)
    ceiling = min(1.0, 0.1 * 2 ** (attempt - 1))
    draws = np.array([policy.delay(attempt, None, rng) for _ in range(DRAWS)])
    assert draws.min() >= 0
    assert draws.max() <= ceiling
    # Uniform over [0, ceiling]: it spreads over the whole range, mean near the middle.
    assert draws.min() < 0.01 * ceiling
    assert draws.max() > 0.99 * ceiling
    assert draws.mean() == pytest.approx(ceiling / 2, rel=0.05)


@pytest.mark.parametrize("attempt", [1, 3, 6])
def test_equal_jitter_within_half_and_full_ceiling(attempt: int) -> None:
    rng = np.random.default_rng(attempt)
    policy = EqualJitter(0.2, 2.0)
    v = min(2.0, 0.2 * 2 ** (attempt - 1))
    draws = np.array([policy.delay(attempt, None, rng) for _ in range(DRAWS)])
    assert draws.min() >= v / 2
    assert draws.max() <= v
    assert draws.min() < v / 2 + 0.01 * v
    assert draws.mean() == pytest.approx(0.75 * v, rel=0.05)


def test_decorrelated_jitter_follows_its_recurrence() -> None:
    rng = np.random.default_rng(3)
    policy = DecorrelatedJitter(0.1, 2.0)
    for _ in range(500):
        prev: float | None = None
        for attempt in range(1, 10):
            d = policy.delay(attempt, prev, rng)
            upper = 3 * (0.1 if prev is None else prev)
            assert 0.1 <= d <= min(2.0, max(upper, 0.1))
            assert d <= 2.0
            prev = d
    # It does grow to the cap (not just staying near base): some chain hits it exactly.
    capped = 0
    for _ in range(200):
        prev = None
        for attempt in range(1, 20):
            prev = policy.delay(attempt, prev, rng)
            capped += prev == 2.0
    assert capped > 0


def test_backoff_validation() -> None:
    with pytest.raises(ValueError, match="delay_s"):
        Fixed(-1)
    with pytest.raises(ValueError, match="multiplier"):
        FullJitter(0.1, 1, multiplier=0.5)


# --- the composed policy ------------------------------------------------------------------


def test_max_attempts_respected() -> None:
    policy = Retrier(Fixed(0.5), np.random.default_rng(0), max_attempts=3)
    assert policy.next_delay(fail(1)) == 0.5
    assert policy.next_delay(fail(2)) == 0.5
    assert policy.next_delay(fail(3)) is None


@pytest.mark.parametrize(
    ("outcome", "retried"),
    [
        (fail(1, 503), True),
        (fail(1, 429), True),
        (fail(1, 400), False),
        (fail(1, 401, "auth_error"), False),
        (fail(1, 500), False),
        (fail(1, None, "timeout"), True),
        (fail(1, None, "connection_dropped"), True),
        (fail(1, None, "tls_error"), False),
        (ok(1), False),
    ],
)
def test_only_retryable_failures_are_retried(outcome: AttemptOutcome, retried: bool) -> None:
    policy = Retrier(
        Fixed(0.1),
        np.random.default_rng(0),
        max_attempts=5,
        retry_on=RetryOn.of([429, 503, "timeout", "connection_dropped"]),
    )
    assert (policy.next_delay(outcome) is not None) is retried


def test_retry_after_honoured_capped_and_falls_back() -> None:
    policy = Retrier(
        Fixed(0.25),
        np.random.default_rng(0),
        max_attempts=9,
        retry_after=RetryAfter(cap_s=5.0),
    )
    assert policy.next_delay(fail(1, 429, retry_after=2.0)) == 2.0
    assert policy.next_delay(fail(2, 503, retry_after=1.5)) == 1.5
    assert policy.next_delay(fail(3, 429, retry_after=30.0)) == 5.0  # capped
    assert policy.next_delay(fail(4, 429, retry_after=None)) == 0.25  # no header: fallback
    assert policy.next_delay(fail(5, 502, retry_after=3.0)) == 0.25  # not a 429/503: fallback
    assert policy.next_delay(fail(6, None, "timeout")) == 0.25


def test_decorrelated_state_is_per_chain_and_restarts_on_a_new_request() -> None:
    rng = FixedRng([1.0 - 1e-12] * 4)  # always the top of the range
    policy = Retrier(DecorrelatedJitter(0.1, 100), rng, max_attempts=10)
    policy.record(fail(1))
    first = policy.next_delay(fail(1))
    policy.record(fail(2))
    second = policy.next_delay(fail(2))
    assert first == pytest.approx(0.3)
    assert second == pytest.approx(0.9)
    policy.record(fail(1))  # a new request's first attempt
    assert policy.next_delay(fail(1)) == pytest.approx(0.3)


def test_retrier_satisfies_the_protocol() -> None:
    policy: RetryPolicy = build_retry(
        "exponential:full", FakeClock(), np.random.default_rng(0)
    ).policy()
    assert policy.admit()


# --- budget -------------------------------------------------------------------------------


def test_budget_never_exceeds_ratio_plus_floor_in_a_long_outage() -> None:
    clock = FakeClock(0.0)
    ratio, floor, ttl = 0.2, 10.0, 10.0
    setup = build_retry(
        {
            "policy": "fixed",
            "delay_s": 0,
            "max_attempts": 4,
            "budget": {"ratio": ratio, "min_per_s": floor, "ttl_s": ttl},
        },
        clock,
        np.random.default_rng(0),
    )
    rate, duration = 200, 300.0  # every request fails, every policy wants 3 retries
    requests = retries = 0
    retry_times: list[float] = []
    request_times: list[float] = []
    users = [setup.policy() for _ in range(50)]
    for i in range(int(rate * duration)):
        clock.t = i / rate
        user = users[i % len(users)]
        attempt = 1
        requests += 1
        request_times.append(clock.t)
        while True:
            outcome = fail(attempt)
            user.record(outcome)
            if user.next_delay(outcome) is None:
                break
            retries += 1
            retry_times.append(clock.t)
            attempt += 1
    assert retries <= ratio * requests + floor * (duration + ttl)
    # ... and the budget binds: without it the policy would have made 3 retries per request.
    assert retries < 0.3 * requests
    # The windowed invariant holds at every retry.
    rt, qt = np.array(retry_times), np.array(request_times)
    for t in rt[:: max(1, len(rt) // 400)]:
        in_window_r = np.count_nonzero((rt > t - ttl) & (rt <= t))
        in_window_q = np.count_nonzero((qt > t - ttl) & (qt <= t))
        assert in_window_r <= floor * ttl + ratio * in_window_q
    assert setup.budget is not None
    assert setup.budget.granted == retries


def test_budget_floor_lets_a_quiet_client_retry() -> None:
    clock = FakeClock(0.0)
    budget = RetryBudget(0.0, 1.0, clock, ttl_s=10)
    assert [budget.try_withdraw() for _ in range(11)] == [True] * 10 + [False]
    clock.t = 10.01  # the window has moved past the first retries
    assert budget.try_withdraw()


def test_sliding_counter_evicts_exactly_after_the_window() -> None:
    clock = FakeClock(0.0)
    c = SlidingCounter(2.0, clock)
    c.add()
    clock.t = 1.0
    c.add()
    clock.t = 1.999
    assert c.count() == 2
    clock.t = 2.0
    assert c.count() == 1
    clock.t = 3.0
    assert c.count() == 0


# --- adaptive throttling ------------------------------------------------------------------


def feed(throttle: AdaptiveThrottle, requests: int, accepts: int) -> None:
    for i in range(requests):
        throttle._requests.add()
        if i < accepts:
            throttle._accepts.add()


def test_throttle_probability_is_the_sre_formula() -> None:
    clock = FakeClock()
    throttle = AdaptiveThrottle(clock, np.random.default_rng(0), k=2)
    assert throttle.p_reject() == 0
    feed(throttle, 1000, 100)
    assert throttle.p_reject() == pytest.approx((1000 - 200) / 1001)
    t2 = AdaptiveThrottle(clock, np.random.default_rng(0), k=2)
    feed(t2, 100, 60)  # 2·accepts > requests: no rejection at all
    assert t2.p_reject() == 0


def test_throttle_admit_rejects_exactly_below_p() -> None:
    throttle = AdaptiveThrottle(FakeClock(), FixedRng([0.7989, 0.7993]), k=2)
    feed(throttle, 999, 100)  # p = (999 − 200) / 1000 = 0.799
    assert throttle.admit() is False  # 0.7989 < 0.799
    # The rejected request counts as a request: p = (1000 − 200) / 1001 = 0.79920...
    assert throttle.admit() is True  # 0.7993 ≥ p
    assert throttle.rejected == 1


def test_throttle_rejects_at_the_sre_rate_statistically() -> None:
    clock = FakeClock()
    throttle = AdaptiveThrottle(clock, np.random.default_rng(5), k=2, window_s=1e9)
    feed(throttle, 2000, 300)
    expected = var = 0.0
    rejected = 0
    for i in range(4000):
        p = (2000 + i - 600) / (2000 + i + 1)
        expected += p
        var += p * (1 - p)
        rejected += not throttle.admit()
    assert abs(rejected - expected) < 6 * var**0.5
    assert throttle.rejected == rejected


def test_throttle_counts_overload_as_not_accepted_and_windows_out() -> None:
    clock = FakeClock(0.0)
    throttle = AdaptiveThrottle(clock, random.Random(0), k=2, window_s=120)
    policy = Retrier(None, random.Random(0), throttle=throttle)
    for _ in range(300):
        policy.admit()
        policy.record(fail(1, 503))
    assert throttle.p_reject() > 0.9
    policy.record(fail(1, 400))  # the backend did the work: an accept
    assert throttle._accepts.count() == 1
    policy.record(fail(1, None, "timeout"))
    assert throttle._accepts.count() == 1
    clock.t = 121.0  # two minutes later the history is gone
    assert throttle.p_reject() == 0


# --- configuration ------------------------------------------------------------------------


def test_config_example_from_the_brief() -> None:
    cfg = parse_retry(
        {
            "policy": "exponential",
            "jitter": "full",
            "base_s": 0.1,
            "cap_s": 5,
            "max_attempts": 4,
            "retry_on": [429, 503, "timeout", "connection_dropped"],
            "budget": {"ratio": 0.2, "min_per_s": 10},
        }
    )
    assert cfg.backoff == FullJitter(0.1, 5.0, 2.0)
    assert cfg.max_attempts == 4
    assert cfg.retry_on == RetryOn(
        frozenset({429, 503}), frozenset({"timeout", "connection_dropped"})
    )
    assert cfg.budget is not None
    assert (cfg.budget.ratio, cfg.budget.min_per_s, cfg.budget.ttl_s) == (0.2, 10.0, 10.0)


@pytest.mark.parametrize(
    ("spec", "backoff", "attempts"),
    [
        ("none", None, 1),
        (None, None, 1),
        ("fixed", Fixed(1.0), 4),
        ("exponential", Exponential(0.1, 5.0), 4),
        ("exponential:equal", EqualJitter(0.1, 5.0), 4),
        ("exponential:decorrelated", DecorrelatedJitter(0.1, 5.0), 4),
        ("retry_after", FullJitter(0.1, 5.0), 4),
    ],
)
def test_config_string_forms(spec: str | None, backoff: object, attempts: int) -> None:
    cfg = parse_retry(spec)
    assert cfg.backoff == backoff
    assert cfg.max_attempts == attempts


def test_retry_after_config_builds_a_working_policy() -> None:
    setup = build_retry(
        {
            "policy": "retry_after",
            "retry_after_cap_s": 3,
            "fallback": {"policy": "fixed", "delay_s": 0.5},
            "throttle": True,
        },
        FakeClock(),
        np.random.default_rng(0),
    )
    policy = setup.policy()
    assert policy.next_delay(fail(1, 429, retry_after=10)) == 3
    assert policy.next_delay(fail(1, 503)) == 0.5
    assert setup.throttle is not None
    assert policy.throttle is setup.throttle
    assert setup.policy().throttle is setup.throttle  # shared across users


def test_policy_none_never_retries() -> None:
    policy = build_retry("none", FakeClock(), np.random.default_rng(0)).policy()
    assert policy.next_delay(fail(1, 503)) is None


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"policy": "sometimes"}, "retry.policy"),
        ({}, "retry.policy"),
        ({"policy": "fixed", "delay": 1}, "retry.delay"),
        ({"policy": "fixed", "jitter": "full"}, "retry.jitter"),
        ({"policy": "exponential", "jitter": "wild"}, "retry.jitter"),
        ({"policy": "exponential", "base_s": -1}, "retry.base_s"),
        ({"policy": "exponential", "base_s": 2, "cap_s": 1}, "retry.cap_s"),
        ({"policy": "exponential", "multiplier": 0.5}, "retry.multiplier"),
        ({"policy": "exponential", "max_attempts": 0}, "retry.max_attempts"),
        ({"policy": "exponential", "max_attempts": "3"}, "retry.max_attempts"),
        ({"policy": "none", "max_attempts": 3}, "retry.max_attempts"),
        ({"policy": "fixed", "retry_on": [429, 42]}, "retry.retry_on"),
        ({"policy": "fixed", "retry_on": "429"}, "retry.retry_on"),
        ({"policy": "fixed", "budget": {"min_per_s": 1}}, "retry.budget.ratio"),
        ({"policy": "fixed", "budget": {"ratio": -0.1}}, "retry.budget.ratio"),
        ({"policy": "fixed", "budget": {"ratio": 0.1, "ttl_s": 0}}, "retry.budget.ttl_s"),
        ({"policy": "fixed", "budget": {"ratio": 0.1, "per": 1}}, "retry.budget.per"),
        ({"policy": "fixed", "budget": 0.2}, "retry.budget"),
        ({"policy": "fixed", "throttle": {"k": 0.5}}, "retry.throttle.k"),
        ({"policy": "fixed", "throttle": "yes"}, "retry.throttle"),
        ({"policy": "fixed", "retry_after_cap_s": 3}, "retry.retry_after_cap_s"),
        ({"policy": "retry_after", "fallback": {"policy": "retry_after"}}, "retry.fallback.policy"),
        ({"policy": "retry_after", "fallback": {"policy": "fixed", "x": 1}}, "retry.fallback.x"),
        (
            {"policy": "retry_after", "retry_after_statuses": [429, 1000]},
            "retry.retry_after_statuses",
        ),
        (42, "retry"),
    ],
)
def test_config_errors_name_the_field(spec: object, field: str) -> None:
    with pytest.raises(RetryConfigError) as info:
        parse_retry(spec)  # type: ignore[arg-type]
    assert info.value.field == field
    assert isinstance(info.value, UsageError)
