"""The needle study on synthetic grids with known parameters: the fit recovers them, the cells
and the depth effect are what was put in, the heatmaps have the grid's shape."""

from __future__ import annotations

import random

import pytest

from ramplab.study.needle.analysis import Variant, study_result
from ramplab.study.needle.model import PrefillModel, Row, cells, expected_cached, fit_ttft

LENGTHS = (1000, 4000, 16000, 32000, 64000, 128000)
DEPTHS = (0.0, 0.5, 1.0)
MODEL = PrefillModel(overhead_ms=20, per_token_ms=0.01, per_token_sq_ms=5e-8)
TRIP_MS = 3.0  # what a client adds to the server's prefill, on top of the model


def grid(cache: bool, noise_ms: float = 0.0, repeats: int = 3, seed: int = 7) -> list[Row]:
    rng = random.Random(seed)
    rows = []
    for length in LENGTHS:
        for depth in DEPTHS:
            position = round(depth * (length - 30))
            cached = expected_cached(position, length, 16) if cache else 0
            for _ in range(repeats):
                ttft = MODEL.prefill_ms(length, cached) + TRIP_MS + rng.gauss(0, noise_ms)
                rows.append(Row(length, depth, position, ttft, ttft + 150.0, ttft, cached))
    return rows


def test_the_fit_recovers_the_configured_quadratic() -> None:
    rows = grid(cache=False, noise_ms=2.0, repeats=5)
    fit = fit_ttft([r.length for r in rows], [r.ttft_send_ms for r in rows])
    assert fit is not None
    assert fit.n == len(rows)
    # Within two half-widths of the 95 % intervals (their coverage: the next test), and the
    # intervals are informative (a few % of the values).
    assert abs(fit.per_token_ms - MODEL.per_token_ms) <= 2 * fit.per_token_half_ms
    assert abs(fit.per_token_sq_ms - MODEL.per_token_sq_ms) <= 2 * fit.per_token_sq_half_ms
    assert fit.per_token_sq_half_ms < 0.1 * MODEL.per_token_sq_ms
    assert abs(fit.intercept_ms - (MODEL.overhead_ms + TRIP_MS)) <= 2 * fit.intercept_half_ms
    assert fit.rmse_ms < 3.0  # the noise's σ is 2 ms
    assert fit.linear_rmse_ms > 10 * fit.rmse_ms  # a line cannot follow P²
    assert fit.predict(128000) == pytest.approx(MODEL.prefill_ms(128000) + TRIP_MS, rel=0.01)


def test_the_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    covered = 0
    trials = 200
    for seed in range(trials):
        rows = grid(cache=False, noise_ms=2.0, repeats=2, seed=seed)
        fit = fit_ttft([r.length for r in rows], [r.ttft_send_ms for r in rows])
        assert fit is not None
        covered += abs(fit.per_token_sq_ms - MODEL.per_token_sq_ms) <= fit.per_token_sq_half_ms
    # Binomial(200, 0.95): 0.90 … 0.99 holds with probability > 0.999.
    assert 0.90 <= covered / trials <= 0.99


def test_no_fit_from_two_lengths() -> None:
    assert fit_ttft([1000, 1000, 2000, 2000], [1.0, 1.0, 2.0, 2.0]) is None


def test_prefill_model_and_cached_blocks() -> None:
    assert MODEL.prefill_ms(1000) == pytest.approx(20 + 10 + 0.05)
    assert MODEL.prefill_ms(1000, 600) == pytest.approx(20 + 4 + (1000**2 - 600**2) * 5e-8)
    assert expected_cached(100, 1000, 16) == 96
    assert expected_cached(1000, 1000, 16) == 992  # the last token is always computed
    assert PrefillModel.from_settings({"prefill_per_token_sq_ms": 1e-7}) == PrefillModel(
        20.0, 0.05, 1e-7, 0.0
    )


def test_cells_take_medians_per_length_and_depth() -> None:
    rows = [Row(1000, 0.5, 480, t, t + 100, t, None) for t in (10.0, 30.0, 11.0)]
    rows.append(Row(2000, 0.5, 980, 50.0, 60.0, 50.0, 960))
    found = cells(rows)
    assert found[1000, 0.5].ttft_ms == 11.0
    assert found[1000, 0.5].ttlt_ms == 111.0
    assert found[1000, 0.5].count == 3
    assert found[1000, 0.5].cached_tokens is None
    assert found[2000, 0.5].cached_tokens == 960


def test_study_on_known_grids_with_and_without_the_cache() -> None:
    variants = [
        Variant("cache-off", grid(cache=False), MODEL, cache_on=False, shared=True, block=16),
        Variant("cache-on", grid(cache=True), MODEL, cache_on=True, shared=True, block=16),
    ]
    result = study_result(variants, [])
    assert result.study == "needle"
    # Two heatmaps per variant, each lengths × depths.
    assert len(result.charts) == 4
    heat = result.charts[0]["data"][0]
    assert heat["type"] == "heatmap"
    assert len(heat["z"]) == len(LENGTHS)
    assert all(len(row) == len(DEPTHS) for row in heat["z"])
    off = result.data["variants"]["cache-off"]
    on = result.data["variants"]["cache-on"]
    # Without the cache depth changes nothing; with it, the deepest needle at 128K prefills
    # only the needle and the question: the measured change is the model's.
    assert all(abs(e["change"]) < 1e-9 for e in off["depth_effect"])
    longest = on["depth_effect"][-1]
    assert longest["length"] == 128000
    assert longest["change"] < -0.9
    # The model's change is for the prefill, the measured one includes the 3 ms trip.
    expected = (MODEL.prefill_ms(128000, expected_cached(127970, 128000, 16)) + TRIP_MS) / (
        MODEL.prefill_ms(128000) + TRIP_MS
    ) - 1
    assert longest["change"] == pytest.approx(expected)
    # Both fits use only requests with nothing cached: the cache-on one its depth-0 requests.
    assert off["fit"]["n"] == len(LENGTHS) * len(DEPTHS) * 3
    assert on["fit"]["n"] == len(LENGTHS) * 3
    assert on["fit"]["per_token_sq_ms"] == pytest.approx(MODEL.per_token_sq_ms, rel=1e-6)
    text = " ".join(result.conclusions)
    assert "0.0500 ms per (1M tokens)²" in text or "50.000 ms per (1M tokens)²" in text
    assert "128,000 tokens" in text
    markdown = result.markdown()
    assert "Effect of depth" in markdown
    assert "fitted (95 %) vs configured" in markdown
