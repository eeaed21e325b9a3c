"""The retries study's model on inputs whose answers are known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ramplab.study.retries import model
from ramplab.study.retries.replay import Faults, Replay, even_arrivals, recovery_s, replay


def test_independent_faults_follow_the_geometric_sums() -> None:
    # p = 0.5, 3 attempts: A = 1 + 0.5 + 0.25, S = 1 − 0.125; K ∈ {1, 2, 3} w.p. ½, ¼, ¼.
    got = model.independent(0.5, 3)
    assert got.amplification == pytest.approx(1.75)
    assert got.success == pytest.approx(0.875)
    assert got.attempts_sd == pytest.approx(math.sqrt(0.5 + 4 * 0.25 + 9 * 0.25 - 1.75**2))
    assert model.independent(0.3, 1).amplification == 1
    assert model.independent(0.3, 1).success == pytest.approx(0.7)
    assert model.independent(0.0, 4).amplification == 1
    for p in (0.1, 0.3, 0.7):
        for n in (1, 2, 4, 10):
            free = model.independent(p, n)
            assert free.success == pytest.approx((1 - p) * free.amplification)


def test_a_budget_caps_amplification_and_success_follows_the_attempts() -> None:
    assert model.budget_cap(0.2, 0.0, 100, 10.0, 10.0) == pytest.approx(1.2)
    # The floor: 10 retries/s over (T + ttl) = 20 s on 1000 requests adds 0.2.
    assert model.budget_cap(0.2, 10.0, 1000, 10.0, 10.0) == pytest.approx(1.4)
    capped = model.with_cap(0.3, 4, 1.2)
    assert capped.amplification == pytest.approx(1.2)
    assert capped.success == pytest.approx(0.84)
    assert model.with_cap(0.1, 4, 1.2) == model.independent(0.1, 4)  # the cap does not bind


def test_throttling_is_idle_below_one_minus_one_over_k() -> None:
    assert model.throttle_rejection(0.49, 2) == 0
    assert model.throttle_rejection(0.51, 2) == 1
    assert model.throttle_rejection(0.6, 3) == 0


def test_erlang_blocking_matches_the_textbook_cases() -> None:
    # M/M/1/1: a / (1 + a); Erlang B with c = 2, a = 1: (1/2) / (1 + 1 + 1/2) = 0.2.
    assert model.erlang_blocking(1.5, 1, 0) == pytest.approx(1.5 / 2.5)
    assert model.erlang_blocking(1.0, 2, 0) == pytest.approx(0.2)
    # M/M/1/2 at a = 1: three equally likely states.
    assert model.erlang_blocking(1.0, 1, 1) == pytest.approx(1 / 3)
    assert model.erlang_blocking(0.0, 2, 2) == 0


def test_the_shed_fixed_point_includes_the_retries_own_load() -> None:
    once = model.shed_fixed_point(18.0, 0.1, 2, 2, lambda p: 1.0)
    assert once == pytest.approx(model.erlang_blocking(1.8, 2, 2))
    retried = model.shed_fixed_point(
        18.0, 0.1, 2, 2, lambda p: model.independent(p, 4).amplification
    )
    assert retried > once
    a = model.independent(retried, 4).amplification
    assert retried == pytest.approx(model.erlang_blocking(18.0 * a * 0.1, 2, 2), abs=1e-6)


def _server(faults: Faults, slo: float | None = None, slots: int = 64) -> Replay:
    return Replay(faults, ok_ttft_s=0.05, fail_s=0.005, service_s=0.1, slots=slots, slo_ttft_s=slo)


def test_the_replay_of_the_policy_code_agrees_with_the_closed_forms() -> None:
    arrivals = even_arrivals([(0.0, 200.0, 100.0)])  # 20,000 requests
    assert arrivals.size == 20_000
    server = _server(Faults(p=0.3, retry_after_s=0.5))
    free = model.independent(0.3, 4)
    got = replay({"policy": "exponential", "jitter": "full", "max_attempts": 4}, server, arrivals)
    err = 3 * free.attempts_sd / math.sqrt(arrivals.size)
    assert got.amplification() == pytest.approx(free.amplification, abs=err)
    assert got.share(got.ok) == pytest.approx(free.success, abs=0.005)
    budget = {"policy": "exponential", "budget": {"ratio": 0.2, "min_per_s": 0}}
    capped = replay(budget, server, arrivals)
    assert capped.amplification() == pytest.approx(1.2, abs=0.01)
    assert capped.share(capped.ok) == pytest.approx(0.84, abs=0.01)
    throttled = {"policy": "exponential", "throttle": {"k": 2, "window_s": 5}}
    assert replay(throttled, server, arrivals).amplification() == pytest.approx(
        free.amplification, abs=err
    )


def test_retry_after_rides_out_a_window_and_a_short_schedule_gives_up_inside_it() -> None:
    arrivals = even_arrivals([(0.0, 10.0, 10.0)])
    server = _server(Faults(window=(2.0, 4.0)))
    after = replay({"policy": "retry_after", "retry_after_cap_s": 5}, server, arrivals)
    caught = (arrivals >= 2.0) & (arrivals < 4.0)
    assert after.ok.all()
    assert (after.attempts[caught] == 2).all()
    assert (after.attempts[~caught] == 1).all()
    # Every retry lands when the window ends (plus the refused attempt's 5 ms).
    assert np.allclose(after.last_attempt_s[caught], 4.005)
    # Fixed 0.25 s, 3 retries: a chain lasts 3 × 0.255 s, so only the window's last 0.765 s
    # (and not the arrival at 3.2 s exactly 0.765 s before the end: it retries at 3.965) survive.
    fixed = replay({"policy": "fixed", "delay_s": 0.25, "max_attempts": 4}, server, arrivals)
    survived = arrivals[caught & fixed.ok]
    assert survived.min() == pytest.approx(3.3)
    assert (fixed.attempts[caught & ~fixed.ok] == 4).all()


def test_the_wave_after_a_window_queues_and_delays_recovery() -> None:
    arrivals = even_arrivals([(0.0, 12.0, 12.0)])
    server = _server(Faults(window=(3.0, 5.5)), slo=1.0, slots=2)
    after = replay({"policy": "retry_after", "retry_after_cap_s": 5}, server, arrivals)
    # 30 retries at once into 2 slots of 0.1 s: the newcomers wait over a second at first.
    late = recovery_s(after.intended, after.good, 5.5, 12.0)
    assert late is not None
    assert late > 0.5
    none = replay("none", server, arrivals)
    assert recovery_s(none.intended, none.good, 5.5, 12.0) == 0.0


def test_recovery_uses_the_summary_rule() -> None:
    t = np.arange(0.0, 5.0, 0.1)
    good = t >= 2.0  # everything good from 2 s on
    assert recovery_s(t, good, 1.0, 5.0) == pytest.approx(1.0)
    assert recovery_s(t, np.zeros_like(good), 1.0, 5.0) is None
