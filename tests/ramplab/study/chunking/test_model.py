"""The two-phase fit and the optimum on synthetic requests with known parameters.

Synthetic sweeps are built the way the reference target paces a stream (chunking_model.py):
each run draws its own shift (the run-to-run drift of a shared machine) and each request its own
noise, in both phases. With 14 runs the 95 % intervals must hold the true values; over many
seeds they must hold them about 95 % of the time (not 60 %, not 100 %).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ramplab.errors import ModelError
from ramplab.study.chunking.model import StreamRows, fit_two_phase
from ramplab.study.chunking.optimum import optimum

TRUE = {"t0_ms": 15.0, "itl_ms": 5.0, "startup_ms": 0.6, "tail_ms": 0.4}
SLEEPS = (0.0, 1.0)
CHUNKS = (1, 2, 4, 8, 16, 32, 64)
N = 64


def sweep(
    seed: int,
    chunks: tuple[int, ...] = CHUNKS,
    sleeps: tuple[float, ...] = SLEEPS,
    per_run: int = 60,
    request_sd: float = 2.0,
    run_sd: float = 0.8,
    overhead: float = 0.02,
) -> StreamRows:
    """Requests of a chunk × sleep sweep with per-event cost = sleep + ``overhead``."""
    rng = np.random.default_rng(seed)
    rows = []
    run = 0
    for sleep in sleeps:
        for chunk in chunks:
            first, events = min(chunk, N), math.ceil(N / chunk)
            shift = rng.normal(0, run_sd, 2)
            for _ in range(per_run):
                ttft = TRUE["t0_ms"] + max(TRUE["itl_ms"] * (first - 1), TRUE["startup_ms"])
                ttft += shift[0] + rng.normal(0, request_sd)
                stream = 0.0
                if events > 1:
                    stream = (
                        TRUE["tail_ms"]
                        + TRUE["itl_ms"] * (N - first)
                        + (sleep + overhead) * (events - 1)
                        - (TRUE["startup_ms"] if first == 1 else 0.0)
                        + shift[1] * 0.3
                        + rng.normal(0, request_sd / 2)
                    )
                rows.append((run, sleep, first, events, N, ttft, ttft + stream))
            run += 1
    return StreamRows.of(rows)


def test_the_fit_recovers_known_parameters_within_its_intervals() -> None:
    fit = fit_two_phase(sweep(seed=1))
    for name, value in TRUE.items():
        assert fit.parameter(name).covers(value), (name, fit.parameter(name))
    for sleep in SLEEPS:
        sigma = fit.parameter(f"event_ms[sleep={sleep:g}]")
        assert sigma.covers(sleep + 0.02), sigma
    # The intervals say something: τ to within 1 %, the per-event cost to within 0.05 ms.
    assert fit.parameter("itl_ms").high - fit.parameter("itl_ms").low < 0.1
    assert fit.parameter("event_ms[sleep=1]").high - fit.parameter("event_ms[sleep=1]").low < 0.1
    assert fit.dof == 14 + 12 - 6  # run means (TTFT, and D where E > 1) − parameters
    assert 1.5 < fit.residual_rms_ms[0] < 3.0  # request SD 2 plus the run shifts
    assert fit.run_sd_ms[0] == pytest.approx(0.8, abs=0.6)


def test_the_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    # 60 independent sweeps: coverage below ~85 % would mean the run-to-run drift is ignored
    # (per-request intervals cover τ ~60 % here); 100 % would mean intervals far too wide.
    hits = {"itl_ms": 0, "event_ms[sleep=1]": 0}
    trials = 60
    for seed in range(trials):
        fit = fit_two_phase(sweep(seed=100 + seed, per_run=30))
        hits["itl_ms"] += fit.parameter("itl_ms").covers(5.0)
        hits["event_ms[sleep=1]"] += fit.parameter("event_ms[sleep=1]").covers(1.02)
    for name, count in hits.items():
        assert 0.83 <= count / trials <= 1.0, (name, count)


def test_residuals_are_exactly_zero_without_noise() -> None:
    fit = fit_two_phase(sweep(seed=2, request_sd=0.0, run_sd=0.0))
    assert fit.residual_max_ms[0] < 1e-6
    assert fit.residual_max_ms[1] < 1e-6
    assert fit.value("itl_ms") == pytest.approx(5.0, abs=1e-9)
    assert fit.value("event_ms[sleep=1]") == pytest.approx(1.02, abs=1e-9)
    assert fit.predict(8, N, 1.0).ttft_ms == pytest.approx(15.0 + 35.0)
    assert fit.predict(8, N, 1.0).ttlt_ms == pytest.approx(15.0 + 0.4 + 5.0 * 63 + 1.02 * 7)
    assert fit.predict(64, N, 1.0).ttlt_ms == fit.predict(64, N, 1.0).ttft_ms


def test_the_optimum_of_ttft_plus_ttlt_is_the_discrete_minimum_of_the_model() -> None:
    fit = fit_two_phase(sweep(seed=3, request_sd=0.0, run_sd=0.0))
    best = optimum(fit, N, 1.0, "sum")
    # J(c) = 2·t0 + τ(N − 1) + τ(c − 1) + σ(⌈N/c⌉ − 1) + δ (E > 1) + s (c = 1): brute force.
    costs = {
        c: 5.0 * (c - 1) + 1.02 * (math.ceil(N / c) - 1) + (0.4 if c < N else 0.0)
        for c in range(1, N + 1)
    }
    costs[1] += 0.6  # the start-up delays the first event of chunk 1 (not the last)
    assert best.chunk == min(costs, key=lambda c: costs[c]) == 4
    assert (best.low, best.high, best.agreement) == (4, 4, 1.0)
    assert optimum(fit, N, 0.0, "sum").chunk == 1


def test_the_constrained_optimum_is_the_largest_chunk_within_the_ttft_budget() -> None:
    fit = fit_two_phase(sweep(seed=4, request_sd=0.0, run_sd=0.0))
    # TTFT(c) = 15 + 5(c − 1) ≤ 100 → c ≤ 18; TTLT falls with every event saved at sleep 1 ms,
    # and ⌈64/17⌉ = ⌈64/18⌉ = 4: the tie goes to the smaller chunk.
    best = optimum(fit, N, 1.0, "ttlt_under_ttft", budget_ms=100.0)
    assert best.chunk == 16
    assert best.ttft_ms <= 100.0
    assert optimum(fit, N, 1.0, "ttlt_under_ttft", budget_ms=5.0).chunk is None


def test_a_sweep_that_cannot_separate_the_parameters_is_refused() -> None:
    with pytest.raises(ModelError, match="does not separate"):
        fit_two_phase(sweep(seed=5, chunks=(1, 16)))
    with pytest.raises(ModelError, match="no successful request"):
        fit_two_phase(StreamRows.of([]))


def test_a_sweep_of_one_sleep_setting_fits_its_own_event_cost() -> None:
    fit = fit_two_phase(sweep(seed=6, chunks=(2, 8, 32), sleeps=(1.0,)))
    assert [p.name for p in fit.parameters] == ["t0_ms", "itl_ms", "tail_ms", "event_ms[sleep=1]"]
    assert fit.parameter("itl_ms").covers(5.0)
    assert fit.parameter("event_ms[sleep=1]").covers(1.02)
